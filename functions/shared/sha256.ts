import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';

/** SHA-256 (and HMAC-SHA-256 with a secret) for SigV4, on node:crypto, so no hashing package is needed. */
export class NodeSha256 {
  private hash: Hash | Hmac;
  constructor(private readonly secret?: string | ArrayBuffer | ArrayBufferView) {
    this.hash = this.fresh();
  }
  private fresh(): Hash | Hmac {
    if (this.secret === undefined) return createHash('sha256');
    const key =
      typeof this.secret === 'string'
        ? this.secret
        : ArrayBuffer.isView(this.secret)
          ? Buffer.from(this.secret.buffer, this.secret.byteOffset, this.secret.byteLength)
          : Buffer.from(this.secret);
    return createHmac('sha256', key);
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    if (typeof data === 'string') this.hash.update(data, 'utf8');
    else if (ArrayBuffer.isView(data))
      this.hash.update(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    else this.hash.update(Buffer.from(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
  reset(): void {
    this.hash = this.fresh();
  }
}
