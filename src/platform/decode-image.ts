/**
 * Image bytes to 8-bit RGB pixels, with the platform's decoder: in pages and workers the
 * browser's own (`createImageBitmap` drawn on an `OffscreenCanvas`), in Node `sharp` (libvips:
 * the one well-kept Node library that decodes PNG, JPEG, WebP and GIF, applies EXIF orientation
 * and flattens alpha in one pass; an optional peer dependency, imported only when first needed,
 * as `webgpu` is). Both give what transformers' `load_image` + Idefics3's `convert_to_rgb` give:
 * EXIF orientation applied, a GIF's first frame, RGBA flattened on white, grayscale expanded.
 */

/** Pixels row by row, 3 bytes (R, G, B) each. */
export interface RgbImage {
  width: number;
  height: number;
  data: Uint8Array;
}

/** The formats decoded everywhere (each platform decodes more; the rest are refused alike). */
export type ImageFormat = 'png' | 'jpeg' | 'webp' | 'gif';

/** Why an image was not decoded: its format, its pixels past a limit, or a decoder failure. */
export class ImageDecodeError extends Error {
  override name = 'ImageDecodeError';
  constructor(
    readonly code: 'unsupported_format' | 'too_large' | 'undecodable' | 'no_decoder',
    message: string,
  ) {
    super(message);
  }
}

/** The format by its magic bytes, or null. */
export function sniffImageFormat(b: Uint8Array): ImageFormat | null {
  const at = (i: number, s: string) => [...s].every((c, k) => b[i + k] === c.charCodeAt(0));
  if (b.length >= 8 && b[0] === 0x89 && at(1, 'PNG\r\n\x1a\n')) return 'png';
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg';
  if (b.length >= 12 && at(0, 'RIFF') && at(8, 'WEBP')) return 'webp';
  if (b.length >= 6 && (at(0, 'GIF87a') || at(0, 'GIF89a'))) return 'gif';
  return null;
}

/** Decodes `bytes`; an image of more than `maxPixels` pixels is refused before its pixels are made. */
export async function decodeImage(bytes: Uint8Array, maxPixels: number): Promise<RgbImage> {
  if (!sniffImageFormat(bytes)) throw new ImageDecodeError('unsupported_format', 'the image is not PNG, JPEG, WebP or GIF');
  const browser = typeof createImageBitmap === 'function' && typeof OffscreenCanvas === 'function';
  return browser ? decodeInBrowser(bytes, maxPixels) : decodeInNode(bytes, maxPixels);
}

const tooLarge = (w: number, h: number, maxPixels: number) =>
  new ImageDecodeError('too_large', `the image is ${w}x${h} pixels, more than the limit of ${maxPixels}`);

async function decodeInBrowser(bytes: Uint8Array, maxPixels: number): Promise<RgbImage> {
  let bitmap: ImageBitmap;
  try {
    // No colour-space conversion and straight alpha: the file's own values, as Pillow reads them.
    bitmap = await createImageBitmap(new Blob([bytes as BlobPart]), { imageOrientation: 'from-image', premultiplyAlpha: 'none', colorSpaceConversion: 'none' });
  } catch (e) {
    throw new ImageDecodeError('undecodable', `the image could not be decoded: ${(e as Error).message}`);
  }
  try {
    const { width, height } = bitmap;
    if (width * height > maxPixels) throw tooLarge(width, height, maxPixels);
    const canvas = new OffscreenCanvas(width, height);
    const ctx = canvas.getContext('2d', { willReadFrequently: true })!;
    // Drawing over white flattens alpha on white, as Idefics3's convert_to_rgb does.
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, width, height);
    ctx.drawImage(bitmap, 0, 0);
    const rgba = ctx.getImageData(0, 0, width, height).data;
    const data = new Uint8Array(width * height * 3);
    for (let i = 0, j = 0; i < rgba.length; i += 4, j += 3) {
      data[j] = rgba[i]!;
      data[j + 1] = rgba[i + 1]!;
      data[j + 2] = rgba[i + 2]!;
    }
    return { width, height, data };
  } finally {
    bitmap.close();
  }
}

interface SharpInstance {
  rotate(): SharpInstance;
  flatten(o: { background: string }): SharpInstance;
  toColourspace(c: string): SharpInstance;
  removeAlpha(): SharpInstance;
  raw(): SharpInstance;
  metadata(): Promise<{ width?: number; height?: number; autoOrient?: { width: number; height: number } }>;
  toBuffer(o: { resolveWithObject: true }): Promise<{ data: Uint8Array; info: { width: number; height: number; channels: number } }>;
}
type Sharp = (input: Uint8Array, options: { limitInputPixels: number | false; pages: number; failOn: string }) => SharpInstance;

let sharpModule: Promise<Sharp> | undefined;

function loadSharp(): Promise<Sharp> {
  // Required through node:module's createRequire, as xgrammar's Node loader does: the library
  // build folded a name in a variable back into a literal import("sharp"), which app bundlers
  // then tried to resolve for the browser (Vite's dev server and webpack 5 failed on it), while
  // node:module is stubbed in the browser parts (vite.config.ts nodeOnlyModules).
  // .catch, not then's second argument: a missing sharp throws in the require, inside the then.
  sharpModule ??= import('node:module')
    .then(({ createRequire }) => createRequire(import.meta.url)('sharp') as Sharp)
    .catch((cause) => {
      sharpModule = undefined;
      throw new ImageDecodeError('no_decoder', `images need the \`sharp\` package in Node: run \`npm install sharp\` (${String(cause)})`);
    });
  return sharpModule;
}

async function decodeInNode(bytes: Uint8Array, maxPixels: number): Promise<RgbImage> {
  const sharp = await loadSharp();
  try {
    const open = () => sharp(bytes, { limitInputPixels: false, pages: 1, failOn: 'error' });
    const meta = await open().metadata();
    const w = meta.width ?? 0;
    const h = meta.height ?? 0;
    if (w * h > maxPixels) throw tooLarge(w, h, maxPixels);
    const { data, info } = await open().rotate().flatten({ background: '#ffffff' }).toColourspace('srgb').removeAlpha().raw().toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) throw new ImageDecodeError('undecodable', `the decoder gave ${info.channels} channels, not 3`);
    return { width: info.width, height: info.height, data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
  } catch (e) {
    if (e instanceof ImageDecodeError) throw e;
    throw new ImageDecodeError('undecodable', `the image could not be decoded: ${(e as Error).message}`);
  }
}
