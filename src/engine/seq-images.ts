/**
 * A sequence's prompt images: where each one's tokens sit in the prompt, the key the prefix cache
 * files those positions under (the image's content hash, so a page holding image tokens matches
 * only a prompt with the same image there: the ids alone are the same for every image), and its
 * embeddings once the tower encoded them. The runner encodes an image in the first step that feeds
 * one of its positions; an image whose positions all come from the prefix cache is never encoded.
 */
import { sha256Hex } from '../formats/sha256';
import type { PromptImage } from './types';

export interface SeqImage {
  readonly tiles: readonly Float32Array[];
  /** Its image-token positions in the prompt, in order (tokensPerTile per tile). */
  readonly positions: readonly number[];
  /** Each tile's embeddings (tokensPerTile × hidden), once encoded. */
  rows: Float32Array[] | null;
}

export class SeqImages {
  /** Prefix-cache keys of the image-token positions: `<content hash>:<index in the image>`. */
  readonly keys: ReadonlyMap<number, string>;
  private readonly byPosition = new Map<number, { image: SeqImage; index: number }>();

  private constructor(
    readonly images: readonly SeqImage[],
    hashes: readonly string[],
    private readonly perTile: number,
    private readonly dim: number,
  ) {
    const keys = new Map<number, string>();
    images.forEach((image, i) =>
      image.positions.forEach((pos, index) => {
        keys.set(pos, `${hashes[i]}:${index}`);
        this.byPosition.set(pos, { image, index });
      }),
    );
    this.keys = keys;
  }

  /**
   * The images of a prompt whose `imageTokenId` positions they fill in order (each image's tiles
   * row by row, `perTile` positions a tile); null when the counts disagree.
   */
  static async of(promptIds: readonly number[], imageTokenId: number, images: readonly PromptImage[], perTile: number, dim: number): Promise<SeqImages | null> {
    const positions: number[] = [];
    promptIds.forEach((id, pos) => id === imageTokenId && positions.push(pos));
    if (positions.length !== images.reduce((n, im) => n + im.tiles.length * perTile, 0)) return null;
    let at = 0;
    const seqImages = images.map((im) => {
      const n = im.tiles.length * perTile;
      return { tiles: im.tiles, positions: positions.slice(at, (at += n)), rows: null };
    });
    return new SeqImages(seqImages, await Promise.all(images.map((im) => contentHash(im.tiles))), perTile, dim);
  }

  /** Images not yet encoded with a position in [from, to): what a step feeding those positions needs. */
  pending(from: number, to: number): SeqImage[] {
    return this.images.filter((im) => !im.rows && im.positions.some((p) => p >= from && p < to));
  }

  /** The embedding at a prompt position (undefined: not an image position, or not encoded). */
  rowAt(pos: number): Float32Array | undefined {
    const at = this.byPosition.get(pos);
    const rows = at?.image.rows;
    if (!at || !rows) return undefined;
    const tile = Math.floor(at.index / this.perTile);
    const i = at.index % this.perTile;
    return rows[tile]!.subarray(i * this.dim, (i + 1) * this.dim);
  }
}

/**
 * The hex SHA-256 of an image's processed tiles (what the model sees, so two files of the same
 * pixels share it), through WebCrypto: there wherever WebGPU is (both need a secure context) and
 * in Node.
 */
export async function contentHash(tiles: readonly Float32Array[]): Promise<string> {
  const bytes = new Uint8Array(tiles.reduce((n, t) => n + 4 + t.byteLength, 0));
  const view = new DataView(bytes.buffer);
  let at = 0;
  for (const t of tiles) {
    // Each tile's length first: the same values split into other tiles hash apart.
    view.setUint32(at, t.length, true);
    bytes.set(new Uint8Array(t.buffer, t.byteOffset, t.byteLength), at + 4);
    at += 4 + t.byteLength;
  }
  return sha256Hex(bytes);
}
