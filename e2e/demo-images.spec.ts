/**
 * The demo's image input end to end: the tiny SmolVLM's HF folder (bundled by
 * tools/bundle-demo-model.ts, random weights) loaded by URL, an image attached with the composer's
 * file input, and the message sent: the image goes as an image_url part (data: URL) before the
 * text, the user's bubble shows its thumbnail, and a reply comes back.
 */
import { expect, test } from '@playwright/test';

/** A 40 x 30 PNG (3 x 4 tiles and the global image at the fixture's 32-px tiles), drawn in the page. */
async function png(page: import('@playwright/test').Page): Promise<Buffer> {
  const b64 = await page.evaluate(async () => {
    const canvas = new OffscreenCanvas(40, 30);
    const g = canvas.getContext('2d')!;
    g.fillStyle = '#3a7';
    g.fillRect(0, 0, 40, 30);
    g.fillStyle = '#d33';
    g.fillRect(8, 6, 16, 12);
    const bytes = new Uint8Array(await (await canvas.convertToBlob({ type: 'image/png' })).arrayBuffer());
    return btoa(String.fromCharCode(...bytes));
  });
  return Buffer.from(b64, 'base64');
}

test('an image attached with the file input goes with the message and shows in the conversation', async ({ page, baseURL }) => {
  test.setTimeout(180_000);
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));

  await page.goto('/');
  await expect(page.locator('#status')).toHaveAttribute('data-state', 'ready', { timeout: 30_000 });
  await page.locator('#hub-model').fill(`${baseURL}/models/tiny-smolvlm/hf-F32`);
  await page.locator('#load').click();
  await expect(page.locator('#progress')).toHaveAttribute('data-state', 'loaded', { timeout: 90_000 });

  // The model's /v1/models entry takes images: the attach button shows.
  await expect(page.locator('#attach')).toBeVisible();
  await page.locator('#attach-input').setInputFiles({ name: 'red-box.png', mimeType: 'image/png', buffer: await png(page) });
  await expect(page.locator('#attachments img')).toHaveCount(1);

  await page.locator('#max-tokens').fill('8');
  await page.locator('#prompt').fill('What is in the picture?');
  await page.locator('#prompt').press('Enter');

  // The user's bubble shows the thumbnail above the text; the tray empties.
  const user = page.locator('.msg.user').last();
  await expect(user.locator('.images img')).toHaveCount(1);
  await expect(user.locator('.images img')).toHaveAttribute('src', /^data:image\/png;base64,/);
  await expect(user).toContainText('What is in the picture?');
  await expect(page.locator('#attachments')).toBeHidden();

  const reply = page.locator('.msg.assistant').last();
  await expect(reply).toHaveAttribute('data-state', 'done', { timeout: 90_000 });
  await expect(reply.locator('.stats')).toContainText('tok/s');

  // What the SDK sent: the image part (a data: URL) before the text.
  const sent = (await page.evaluate(() => window.__lastRequest)) as { messages: Array<{ role: string; content: unknown }> };
  expect(sent.messages.at(-1)).toMatchObject({
    role: 'user',
    content: [{ type: 'image_url', image_url: { url: expect.stringMatching(/^data:image\/png;base64,/) } }, { type: 'text', text: 'What is in the picture?' }],
  });
  expect(pageErrors).toEqual([]);
});
