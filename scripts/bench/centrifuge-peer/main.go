// A Centrifuge node (github.com/centrifugal/centrifuge, Debian's golang-github-centrifugal-centrifuge-dev) with a Redis
// broker keeping history in streams, and an HTTP publish endpoint: the peer scripts/bench/publish-peers.ts measures
// POST /{productId}/realtime/messages against, on the same Redis. Built by scripts/bench/centrifuge-peer/build.
//
//	centrifuge-peer -listen 127.0.0.1:8700 -redis 127.0.0.1:56379 -db 3 -history-size 1000 -history-ttl 300s
//
// POST /publish {"channel": "...", "data": {...}} publishes data with history and answers {"offset": n, "epoch": "..."}.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/centrifugal/centrifuge"
)

type publishBody struct {
	Channel string          `json:"channel"`
	Data    json.RawMessage `json:"data"`
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8700", "address of the HTTP publish endpoint")
	redisAddress := flag.String("redis", "127.0.0.1:6379", "Redis host:port")
	db := flag.Int("db", 0, "Redis database")
	historySize := flag.Int("history-size", 1000, "history entries kept per channel")
	historyTTL := flag.Duration("history-ttl", 300*time.Second, "history retention")
	flag.Parse()

	node, err := centrifuge.New(centrifuge.Config{LogLevel: centrifuge.LogLevelError})
	if err != nil {
		log.Fatal(err)
	}
	shard, err := centrifuge.NewRedisShard(node, centrifuge.RedisShardConfig{Address: *redisAddress, DB: *db})
	if err != nil {
		log.Fatal(err)
	}
	broker, err := centrifuge.NewRedisBroker(node, centrifuge.RedisBrokerConfig{
		Prefix: "bench:centrifuge", UseStreams: true, HistoryMetaTTL: *historyTTL, Shards: []*centrifuge.RedisShard{shard},
	})
	if err != nil {
		log.Fatal(err)
	}
	node.SetBroker(broker)
	if err := node.Run(); err != nil {
		log.Fatal(err)
	}

	http.HandleFunc("/publish", func(w http.ResponseWriter, r *http.Request) {
		var body publishBody
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 65536)).Decode(&body); err != nil || body.Channel == "" {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		result, err := node.Publish(body.Channel, body.Data, centrifuge.WithHistory(*historySize, *historyTTL))
		if err != nil {
			http.Error(w, `{"error":"publish failed"}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]interface{}{"offset": result.Offset, "epoch": result.Epoch})
	})
	http.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	log.Printf("centrifuge peer listening on %s", *listen)
	log.Fatal(http.ListenAndServe(*listen, nil))
}
