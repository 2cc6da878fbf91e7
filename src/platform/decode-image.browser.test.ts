import { describe, expect, it } from 'vitest';
import { decodeImage, ImageDecodeError } from './decode-image';

const bytes = (b64: string) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));

// A 3 x 2 RGBA PNG (written by sharp): opaque red, green at alpha 128, transparent blue; black,
// white, grey. The Node decoder's test (src/api/images.test.ts) reads the same pixels.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAMAAAACCAYAAACddGYaAAAACXBIWXMAAAPoAAAD6AG1e1JrAAAAGklEQVQImRXFsQ0AAACCME7nc4xdShDhu05tgyQL9yk+ePgAAAAASUVORK5CYII=';

describe("the browser's image decoder (createImageBitmap on an OffscreenCanvas)", () => {
  it('decodes a PNG to RGB with alpha flattened on white', async () => {
    const img = await decodeImage(bytes(PNG), 1 << 20);
    expect([img.width, img.height]).toEqual([3, 2]);
    const px = [...img.data];
    // green at alpha 128 over white: 127 (the canvas may round the blend to 128)
    expect(Math.abs(px[3]! - 127)).toBeLessThanOrEqual(1);
    expect(Math.abs(px[5]! - 127)).toBeLessThanOrEqual(1);
    expect([...px.slice(0, 3), px[4], ...px.slice(6)]).toEqual([255, 0, 0, 255, 255, 255, 255, 0, 0, 0, 255, 255, 255, 128, 128, 128]);
  });

  it('refuses what is not an image, and an image past the pixel limit', async () => {
    await expect(decodeImage(new TextEncoder().encode('hello, world'), 1 << 20)).rejects.toBeInstanceOf(ImageDecodeError);
    const e = await decodeImage(bytes(PNG), 5).catch((x: unknown) => x);
    expect((e as ImageDecodeError).code).toBe('too_large');
  });
});
