// S3: where large Realtime payloads are stored.
import { LOCAL_PORTS } from '../local-ports'
import { area, text, url } from '../variable'

export const storage = area('S3', 'The object store that holds Realtime payloads too large to keep inline.', {
  s3Url: url('S3_URL', {
    default: `http://S3RVER:S3RVER@127.0.0.1:${LOCAL_PORTS.s3}`, schemes: ['http', 'https'],
    description: 'S3 endpoint with the credentials in the userinfo part: `http://ACCESS:SECRET@host:port` (path-style requests).',
  }),
  s3Region: text('S3_REGION', { default: 'us-east-1', form: [/^[a-z0-9-]+$/, 'a region name such as us-east-1'], description: 'The S3 region requests are signed for.' }),
})
