import { expect, test } from '@playwright/test';

test('the demo page finds a WebGPU device', async ({ page }) => {
  await page.goto('/');
  const status = page.locator('#status');
  await expect(status).toHaveAttribute('data-state', 'ready', { timeout: 30_000 });
  await expect(status).toContainText('WebGPU ready');
  const info = JSON.parse((await page.locator('#gpu-info').textContent()) ?? '{}');
  expect(info.maxStorageBufferBindingSize).toBeGreaterThan(0);
});
