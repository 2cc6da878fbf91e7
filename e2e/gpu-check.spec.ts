/**
 * The demo's "Check this GPU" in Chromium (SwiftShader): the library's selfCheck() in its own
 * engine Worker with no model loaded, its rows filling the table as they come, then the adapter and
 * a PASS summary. `?selfcheck-only=` keeps it to a few kernels (a full run on SwiftShader takes minutes;
 * the library's browser test checks a generated model through the engine).
 */
import { expect, test } from '@playwright/test';

test('"Check this GPU" fills the table row by row and ends with the adapter and a PASS summary', async ({ page }, testInfo) => {
  test.setTimeout(90_000);
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto('/?selfcheck-only=kernel%20rope&selfcheck-only=kernel%20rms_norm');
  await expect(page.locator('#status')).toHaveAttribute('data-state', 'ready', { timeout: 30_000 });
  await expect(page.locator('body')).toHaveAttribute('data-model', 'none');

  // The summary's state as each row is added: rows come (from onResult) before the summary does.
  await page.evaluate(() => {
    const dialog = document.querySelector('#gpu-check-dialog')!;
    const states: string[] = [];
    (window as unknown as { __rowStates: string[] }).__rowStates = states;
    new MutationObserver((records) => {
      for (const r of records) for (let i = 0; i < r.addedNodes.length; i++) states.push(dialog.querySelector<HTMLElement>('.gpu-check-summary')!.dataset.state ?? '');
    }).observe(dialog.querySelector('tbody')!, { childList: true });
  });
  await page.locator('#check-gpu').click();
  const dialog = page.locator('#gpu-check-dialog');
  await expect(dialog).toBeVisible();

  const summary = dialog.locator('.gpu-check-summary');
  await expect(summary).toHaveAttribute('data-state', /pass|fail|error/, { timeout: 60_000 });
  await expect(summary).toHaveAttribute('data-state', 'pass');
  await expect(summary).toHaveText(/^PASS: (\d+) of \1 checks passed in [\d.]+ s \(f32\)$/);
  await expect(dialog.locator('.gpu-check-adapter')).toHaveText(/^adapter: \S/);

  const rows = dialog.locator('tbody tr');
  const n = await rows.count();
  expect(n).toBeGreaterThan(1);
  expect(new Set(await rows.locator('td:first-child').allTextContents())).toEqual(new Set(['rope', 'rms_norm']));
  await expect(rows.locator('td:last-child')).toHaveText(Array(n).fill('pass'));
  // Max error within tolerance, as numbers, in every row.
  for (const [err, tol] of await rows.evaluateAll((trs) => trs.map((tr) => [Number(tr.children[3]!.textContent), Number(tr.children[4]!.textContent)]))) {
    expect(err).toBeLessThanOrEqual(tol!);
  }
  const states = await page.evaluate(() => (window as unknown as { __rowStates: string[] }).__rowStates);
  expect(states).toEqual(Array(n).fill('running'));
  expect(pageErrors).toEqual([]);
  await page.screenshot({ path: testInfo.outputPath('gpu-check.png') });
});
