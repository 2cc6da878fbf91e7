/**
 * The demo end to end: load the bundled tiny model (random weights, so the text is gibberish),
 * chat through the page's OpenAI SDK client, watch the reply stream, stop one mid-stream, and
 * check the settings reach the request the SDK sends.
 */
import { expect, test, type Locator, type Page } from '@playwright/test';

/** Resolves once the element's text is longer than `than` characters. */
async function textLongerThan(page: Page, target: Locator, than: number, timeout = 60_000): Promise<number> {
  const handle = await target.elementHandle();
  await page.waitForFunction(([el, n]) => (el as Element).textContent!.length > (n as number), [handle, than] as const, { timeout });
  return ((await target.textContent()) ?? '').length;
}

async function setRange(page: Page, selector: string, value: number): Promise<void> {
  await page.locator(selector).evaluate((el, v) => {
    (el as HTMLInputElement).value = String(v);
    el.dispatchEvent(new Event('input', { bubbles: true }));
  }, value);
}

test('the demo loads the bundled model, streams a reply, stops another, and sends the settings', async ({ page }, testInfo) => {
  test.setTimeout(180_000);
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));

  await page.goto('/');
  await expect(page.locator('#status')).toHaveAttribute('data-state', 'ready', { timeout: 30_000 });

  // The bundled model is the default choice; its label says the weights are random.
  await expect(page.locator('input[name="source"][value="bundled"]')).toBeChecked();
  await expect(page.locator('#model-form')).toContainText('random weights');
  await page.locator('#load').click();

  const progress = page.locator('#progress');
  await expect(progress).toHaveAttribute('data-state', 'loaded', { timeout: 90_000 });
  // The bar is driven by the engine's events only: it must have reached 100% by itself.
  await expect(page.locator('#progress-bar')).toHaveAttribute('aria-valuenow', '100');
  await expect(progress.locator('[data-phase-chip="upload"]')).toHaveAttribute('data-state', 'done');
  await expect(progress.locator('[data-phase-chip="compile"]')).toHaveAttribute('data-state', 'done');
  await expect(page.locator('#prompt')).toBeEnabled();
  // SwiftShader has no shader-f16 and is a software adapter: the page says so, with what it means.
  await expect(page.locator('.notice[data-code="no_shader_f16"]')).toContainText('f32');
  await expect(page.locator('.notice[data-code="fallback_adapter"]')).toBeVisible();

  // Settings: greedy decoding (deterministic), a short reply, a system prompt.
  await setRange(page, '#temperature', 0);
  await page.locator('#max-tokens').fill('48');
  await page.locator('#system-prompt').fill('Answer briefly.');

  // First message: Enter sends; the reply grows across two observations.
  await page.locator('#prompt').fill('Hello there, tiny model');
  await page.locator('#prompt').press('Enter');
  const first = page.locator('.msg.assistant').nth(0);
  const content = first.locator('.content');
  const n1 = await textLongerThan(page, content, 0);
  await textLongerThan(page, content, n1);
  await page.screenshot({ path: testInfo.outputPath('mid-stream.png') });
  await expect(first).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
  await expect(first.locator('.stats')).toContainText('tok/s');
  await expect(first.locator('.stats')).toContainText('first token');

  // What the SDK sent went through the shim with the settings in it.
  const sent = (await page.evaluate(() => window.__lastRequest)) as Record<string, unknown>;
  expect(sent).toMatchObject({
    temperature: 0,
    max_tokens: 48,
    stream: true,
    messages: [
      { role: 'system', content: 'Answer briefly.' },
      { role: 'user', content: 'Hello there, tiny model' },
    ],
  });

  // The code panel reproduces the chat with the SDK.
  const code = page.locator('#code');
  await expect(code).toContainText('new OpenAI(');
  await expect(code).toContainText('installFetchShim(engine)');
  await expect(code).toContainText("content: 'Hello there, tiny model'");
  await expect(code).toContainText('max_tokens: 48');

  // Second message: Esc stops it mid-stream.
  await page.locator('#prompt').fill('Tell me more');
  await page.locator('#prompt').press('Enter');
  const second = page.locator('.msg.assistant').nth(1);
  await textLongerThan(page, second.locator('.content'), 0);
  await page.keyboard.press('Escape');
  await expect(second).toHaveAttribute('data-state', 'stopped', { timeout: 10_000 });
  await expect(second.locator('.stats')).toContainText('stopped');
  await expect(page.locator('#send')).toHaveText('Send');
  const stoppedAt = ((await second.locator('.content').textContent()) ?? '').length;
  // The stopped reply stays stopped while a third, short one runs to the end on the same engine.
  await page.locator('#prompt').fill('Again');
  await page.locator('#prompt').press('Enter');
  await expect(page.locator('.msg.assistant').nth(2)).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
  expect(((await second.locator('.content').textContent()) ?? '').length).toBe(stoppedAt);

  // JSON mode: the request carries response_format and the grammar mask makes the reply JSON.
  await page.locator('#json-mode').check();
  await page.locator('#prompt').fill('Answer in JSON');
  await page.locator('#prompt').press('Enter');
  const fourth = page.locator('.msg.assistant').nth(3);
  await expect(fourth).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
  expect(await page.evaluate(() => window.__lastRequest)).toMatchObject({ response_format: { type: 'json_object' } });
  expect(((await fourth.locator('.content').textContent()) ?? '').trim().startsWith('{')).toBe(true);

  expect(pageErrors).toEqual([]);
});

test('the demo says what to do when the browser has no WebGPU', async ({ page }) => {
  await page.addInitScript(() => {
    Object.defineProperty(Navigator.prototype, 'gpu', { get: () => undefined });
  });
  await page.goto('/');
  await expect(page.locator('#status')).toHaveAttribute('data-state', 'error');
  const notice = page.locator('.notice[data-code="webgpu_unavailable"]');
  await expect(notice).toContainText('WebGPU is not available');
  await expect(notice).toContainText('Chrome');
  await expect(page.locator('#load')).toBeDisabled();
});

test('a model loaded from a URL is downloaded, cached, listed with its size, and deleted', async ({ page, baseURL }) => {
  test.setTimeout(120_000);
  await page.goto('/');
  await expect(page.locator('#status')).toHaveAttribute('data-state', 'ready', { timeout: 30_000 });

  // The bundled file again, but by URL: the page treats it as remote and caches it.
  await page.locator('#hub-model').fill(`${baseURL}/models/tiny-qwen3/gguf/model-Q8_0.gguf`);
  await expect(page.locator('input[name="source"][value="hub"]')).toBeChecked();
  await page.locator('#load').click();
  await expect(page.locator('#progress')).toHaveAttribute('data-state', 'loaded', { timeout: 90_000 });
  await expect(page.locator('[data-phase-chip="download"]')).toHaveAttribute('data-state', 'done');
  await expect(page.locator('#progress-bar')).toHaveAttribute('aria-valuenow', '100');

  const item = page.locator('.cache-item');
  await expect(item).toHaveCount(1);
  await expect(item).toContainText('model-Q8_0.gguf');
  await expect(item).toContainText('1.3 MB');
  await item.getByRole('button', { name: /Delete/ }).click();
  await expect(item).toHaveCount(0);
  await expect(page.locator('#cache-summary')).toContainText('Nothing cached');
});

test('a URL that is not a model file gets a message saying what is wrong', async ({ page, baseURL }) => {
  await page.goto('/');
  await expect(page.locator('#status')).toHaveAttribute('data-state', 'ready', { timeout: 30_000 });
  await page.locator('#hub-model').fill(`${baseURL}/models/no-such-model.gguf`);
  await page.locator('#load').click();
  await expect(page.locator('#progress')).toHaveAttribute('data-state', 'error', { timeout: 30_000 });
  const notice = page.locator('.notice.error');
  await expect(notice).toHaveAttribute('data-code', /not_a_model_file|http/);
  await expect(notice).toContainText('no-such-model.gguf');
  await expect(page.locator('#prompt')).toBeDisabled();
});

test('a lost GPU device: the page shows the engine recovering by itself, then chats on', async ({ page }) => {
  test.setTimeout(150_000);
  await page.goto('/');
  await expect(page.locator('#status')).toHaveAttribute('data-state', 'ready', { timeout: 30_000 });
  await page.locator('#load').click();
  await expect(page.locator('#progress')).toHaveAttribute('data-state', 'loaded', { timeout: 90_000 });

  await page.evaluate(() => window.__demo!.loseDevice());
  const notice = page.locator('.notice[data-code="device_recovering"]');
  await expect(notice).toContainText('recovering');
  // Gone once stats() counts the recovery; no "Load again" (that is for an engine that gave up).
  await expect(notice).toHaveCount(0, { timeout: 60_000 });
  await expect(page.locator('.notice[data-code="device_lost"]')).toHaveCount(0);
  await expect(page.locator('#prompt')).toBeEnabled();
  await page.locator('#max-tokens').fill('4');
  await page.locator('#prompt').fill('Hello');
  await page.locator('#prompt').press('Enter');
  await expect(page.locator('.msg.assistant').nth(0)).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
});

test('a LoRA adapter is loaded in the page, chosen for the chat, and unloaded', async ({ page }) => {
  test.setTimeout(180_000);
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto('/');
  await expect(page.locator('#status')).toHaveAttribute('data-state', 'ready', { timeout: 30_000 });
  await expect(page.locator('#adapters')).toBeHidden();
  await page.locator('#load').click();
  await expect(page.locator('#progress')).toHaveAttribute('data-state', 'loaded', { timeout: 90_000 });
  await setRange(page, '#temperature', 0);
  await page.locator('#max-tokens').fill('12');

  // The base model's greedy reply first.
  await page.locator('#prompt').fill('Hello');
  await page.locator('#prompt').press('Enter');
  const base = page.locator('.msg.assistant').nth(0);
  await expect(base).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
  expect(await page.evaluate(() => window.__lastRequest)).toMatchObject({ model: 'qwen3' });

  // The panel offers the bundled adapter: load it; it becomes the chat's model.
  await expect(page.locator('#adapters')).toBeVisible();
  await expect(page.locator('#adapter-source')).toHaveValue(/all-r8-rslora\.gguf$/);
  await page.locator('#adapter-load').click();
  await expect(page.locator('#adapter-note')).toContainText('Loaded tiny-lora: rank 8', { timeout: 60_000 });
  await expect(page.locator('#adapter-use')).toHaveValue('tiny-lora');
  await expect(page.locator('.adapter-item')).toHaveCount(1);
  await page.locator('#prompt').fill('Hello');
  await page.locator('#prompt').press('Enter');
  const adapted = page.locator('.msg.assistant').nth(1);
  await expect(adapted).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
  expect(await page.evaluate(() => window.__lastRequest)).toMatchObject({ model: 'qwen3:tiny-lora' });
  // Same prompt and settings, other weights: another reply (greedy, deterministic).
  expect(await adapted.locator('.content').textContent()).not.toBe(await base.locator('.content').textContent());
  await expect(page.locator('#code')).toContainText("model: 'qwen3:tiny-lora'");

  // Unloaded, the chat goes back to the base model.
  await page.locator('.adapter-item').getByRole('button', { name: /Unload/ }).click();
  await expect(page.locator('.adapter-item')).toHaveCount(0);
  await expect(page.locator('#adapter-use')).toHaveValue('');
  expect(pageErrors).toEqual([]);
});
