import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from './errors';
import { findImageParts, loadImage, type ImageLimits } from './images';

const LIMITS: ImageLimits = { maxImageBytes: 1 << 20, maxImagePixels: 1 << 20, remoteImages: true, imageFetchMs: 5000 };
const part = (url: string) => ({ param: 'messages[0].content[1]', url });
const dataUrl = (b: Uint8Array, mime = 'image/png') => `data:${mime};base64,${Buffer.from(b).toString('base64')}`;

/** A 3 x 2 RGBA image: opaque red, half-transparent green, transparent blue; then black, white, grey, all opaque. */
const RGBA = Buffer.from([255, 0, 0, 255, 0, 255, 0, 128, 0, 0, 255, 0, 0, 0, 0, 255, 255, 255, 255, 255, 128, 128, 128, 255]);
const raw = { raw: { width: 3, height: 2, channels: 4 as const } };

async function refusal(p: Promise<unknown>): Promise<ApiError> {
  const e = await p.then(
    () => null,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(ApiError);
  return e as ApiError;
}

describe('image parts: finding, fetching and decoding', () => {
  it('finds image parts in message order, naming each', () => {
    const img = (url: string) => ({ type: 'image_url', image_url: { url } });
    const parts = findImageParts([
      { role: 'user', content: [{ type: 'text', text: 'a' }, img('u1')] },
      { role: 'assistant', content: 'b' },
      { role: 'user', content: [img('u2'), img('u3')] },
    ]);
    expect(parts).toEqual([
      { param: 'messages[0].content[1]', url: 'u1' },
      { param: 'messages[2].content[0]', url: 'u2' },
      { param: 'messages[2].content[1]', url: 'u3' },
    ]);
  });

  it('decodes a PNG data: URL to RGB, alpha flattened on white (as Idefics3 convert_to_rgb)', async () => {
    const png = await sharp(RGBA, raw).png().toBuffer();
    const img = await loadImage(part(dataUrl(png)), LIMITS);
    expect([img.width, img.height]).toEqual([3, 2]);
    // green at alpha 128 over white: 255 * (1 - 128/255) = 127; transparent blue: white.
    expect([...img.data]).toEqual([255, 0, 0, 127, 255, 127, 255, 255, 255, 0, 0, 0, 255, 255, 255, 128, 128, 128]);
  });

  it('decodes lossless WebP and a GIF, expands grayscale, and applies EXIF orientation', async () => {
    const webp = await sharp(RGBA, raw).removeAlpha().webp({ lossless: true }).toBuffer();
    expect([...(await loadImage(part(dataUrl(webp, 'image/webp')), LIMITS)).data.subarray(0, 6)]).toEqual([255, 0, 0, 0, 255, 0]);
    const gif = await sharp(RGBA, raw).removeAlpha().gif().toBuffer();
    expect((await loadImage(part(dataUrl(gif, 'image/gif')), LIMITS)).width).toBe(3);
    const gray = await sharp(Buffer.from([0, 100, 200, 255]), { raw: { width: 2, height: 2, channels: 1 } }).png().toBuffer();
    expect([...(await loadImage(part(dataUrl(gray)), LIMITS)).data]).toEqual([0, 0, 0, 100, 100, 100, 200, 200, 200, 255, 255, 255]);
    // Orientation 6 (rotate 90° clockwise to view): a 3 x 2 JPEG is shown 2 x 3.
    const jpeg = await sharp(RGBA, raw).removeAlpha().jpeg().withMetadata({ orientation: 6 }).toBuffer();
    const turned = await loadImage(part(dataUrl(jpeg, 'image/jpeg')), LIMITS);
    expect([turned.width, turned.height]).toEqual([2, 3]);
  });

  it('refuses what it cannot decode with a 400 naming the part and the formats', async () => {
    const notImage = await refusal(loadImage(part(dataUrl(new TextEncoder().encode('hello, world'))), LIMITS));
    expect([notImage.status, notImage.param, notImage.code]).toEqual([400, 'messages[0].content[1].image_url.url', 'invalid_image']);
    expect(notImage.message).toMatch(/PNG, JPEG, WebP and GIF/);
    const truncated = await sharp(RGBA, raw).png().toBuffer();
    expect((await refusal(loadImage(part(dataUrl(truncated.subarray(0, 40))), LIMITS))).code).toBe('invalid_image');
    expect((await refusal(loadImage(part('data:image/png;base64,%%%'), LIMITS))).code).toBe('invalid_image_url');
    expect((await refusal(loadImage(part('ftp://example.com/a.png'), LIMITS))).code).toBe('invalid_image_url');
  });

  it('refuses images past the byte and pixel limits', async () => {
    const png = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#808080' } }).png().toBuffer();
    expect((await refusal(loadImage(part(dataUrl(png)), { ...LIMITS, maxImageBytes: 10 }))).code).toBe('image_too_large');
    const e = await refusal(loadImage(part(dataUrl(png)), { ...LIMITS, maxImagePixels: 64 * 63 }));
    expect(e.message).toMatch(/64x64 pixels/);
  });

  describe('http(s) URLs', () => {
    let server: Server;
    let base = '';
    beforeAll(async () => {
      const png = await sharp(RGBA, raw).png().toBuffer();
      server = createServer((req, res) => {
        if (req.url === '/a.png') res.writeHead(200, { 'content-type': 'image/png' }).end(png);
        else res.writeHead(404).end();
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(() => new Promise<void>((r) => server.close(() => r())));

    it('fetches where allowed, and answers 400 for a failed fetch or where the server does not fetch', async () => {
      expect((await loadImage(part(`${base}/a.png`), LIMITS)).width).toBe(3);
      const missing = await refusal(loadImage(part(`${base}/missing.png`), LIMITS));
      expect([missing.code, missing.message]).toEqual(['image_fetch_failed', expect.stringMatching(/HTTP 404/)]);
      expect((await refusal(loadImage(part(`${base}/a.png`), { ...LIMITS, remoteImages: false }))).code).toBe('image_url_not_allowed');
      expect((await refusal(loadImage(part(`${base}/a.png`), { ...LIMITS, maxImageBytes: 10 }))).code).toBe('image_too_large');
    });
  });
});
