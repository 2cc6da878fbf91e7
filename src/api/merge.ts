/** Runs several async generators side by side and yields their values as they come, tagged by source. */
export async function* merge<T>(gens: AsyncGenerator<T, void, void>[]): AsyncGenerator<[number, T], void, void> {
  type Step = { i: number; r: IteratorResult<T, void> };
  const pending = new Map<number, Promise<Step>>();
  const pull = (i: number) => {
    const p = gens[i].next().then((r) => ({ i, r }));
    p.catch(() => undefined); // raced below; this only keeps a late rejection from going unhandled
    pending.set(i, p);
  };
  gens.forEach((_, i) => pull(i));
  try {
    while (pending.size) {
      const { i, r } = await Promise.race(pending.values());
      if (r.done) {
        pending.delete(i);
        continue;
      }
      pull(i);
      yield [i, r.value];
    }
  } finally {
    // Stop the generators still running (the consumer left, or one of them threw).
    await Promise.all([...pending.keys()].map((i) => gens[i].return(undefined).catch(() => undefined)));
  }
}
