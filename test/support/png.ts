import { inflateSync } from 'node:zlib';

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(buf: Buffer): number {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/**
 * Decode a PNG far enough to know it is whole: the signature, every chunk's CRC, IHDR, and the IDAT
 * stream inflated to exactly the size its dimensions call for. Throws on anything else.
 */
export function decodePng(png: Buffer): {
  width: number;
  height: number;
  bitDepth: number;
  colorType: number;
} {
  if (!png.subarray(0, 8).equals(SIGNATURE)) throw new Error('not a PNG: bad signature');
  let at = 8;
  let header: { width: number; height: number; bitDepth: number; colorType: number } | undefined;
  const idat: Buffer[] = [];
  let ended = false;
  while (at < png.length) {
    const length = png.readUInt32BE(at);
    const type = png.subarray(at + 4, at + 8).toString('latin1');
    const data = png.subarray(at + 8, at + 8 + length);
    const crc = png.readUInt32BE(at + 8 + length);
    if (crc32(png.subarray(at + 4, at + 8 + length)) !== crc) throw new Error(`bad CRC in ${type}`);
    if (type === 'IHDR')
      header = {
        width: data.readUInt32BE(0),
        height: data.readUInt32BE(4),
        bitDepth: data[8]!,
        colorType: data[9]!,
      };
    if (type === 'IDAT') idat.push(data);
    at += 12 + length;
    if (type === 'IEND') {
      ended = true;
      break;
    }
  }
  if (!header || !ended) throw new Error('PNG without IHDR or IEND');
  const channels = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 }[header.colorType];
  if (!channels) throw new Error(`unknown colour type ${header.colorType}`);
  const rowBytes = Math.ceil((header.width * channels * header.bitDepth) / 8);
  const raw = inflateSync(Buffer.concat(idat));
  if (raw.length !== header.height * (rowBytes + 1))
    throw new Error(`IDAT holds ${raw.length} bytes, ${header.height * (rowBytes + 1)} expected`);
  return header;
}
