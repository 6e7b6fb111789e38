// DKIM keys of a sending domain: an RSA 2048 pair made at registration. The private key never leaves the server (it is
// stored sealed, shared/secrets.ts); the public key is published in DNS as `v=DKIM1; k=rsa; p=<base64 DER>`.
import { generateKeyPair } from 'node:crypto'
import { promisify } from 'node:util'

const generate = promisify(generateKeyPair)

export interface DkimKeys {
  /** The p= value: base64 of the DER SubjectPublicKeyInfo. */
  publicKey: string
  /** PKCS#8 PEM, for the signer. */
  privateKeyPem: string
}

export async function newDkimKeys(): Promise<DkimKeys> {
  const { publicKey, privateKey } = await generate('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'der' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  })
  return { publicKey: Buffer.from(publicKey).toString('base64'), privateKeyPem: privateKey }
}

export const dkimRecordValue = (publicKey: string) => `v=DKIM1; k=rsa; p=${publicKey}`
