/**
 * The prefix cache shared by every request: a radix tree over token ids whose edges are whole KV
 * pages (as SGLang's RadixAttention, at page granularity, as vLLM's block hashing): the path from
 * the root spells a token prefix, and each node holds the page with that prefix's last
 * `pageSize` tokens' K/V. A new sequence walks the tree with its prompt and adopts the pages it
 * finds instead of computing them; a sequence's full pages enter the tree as it fills them.
 *
 * Pages are reference-counted by `KvPages` (one per sequence using them); the tree holds its pages
 * apart from those counts. A node whose page no sequence uses is evictable; eviction takes the
 * least recently used leaf first, so a prefix never loses its start while its continuation is
 * kept. Because a sequence references every page of its path, an unreferenced node's descendants
 * are unreferenced too: all of them can be evicted, leaf by leaf.
 *
 * A page holding image tokens is keyed by the image's content hash at those positions (`marks`):
 * the ids are the same `<image>` for every image, so without it another image would match.
 *
 * K/V depend on the weights that computed them: a sequence run with a LoRA adapter keys its pages
 * under that adapter's namespace (one tree each), so two adapters, or an adapter and the base
 * model, never share a page even for the same tokens.
 */
import type { KvPages, PageReclaimer } from './kv-pages';

/** A position in the tree (opaque outside this file). */
export interface PrefixCursor {
  readonly node: Node;
  readonly pages: number;
  /** The root of the cursor's namespace. */
  readonly root: Node;
}

/** A node of the tree, opaque outside this file (KV persistence asks whether one is still there: `holds`). */
export type PrefixNode = object;

interface Node {
  page: number;
  key: string;
  parent: Node | null;
  children: Map<string, Node>;
  lastUse: number;
}

export class PrefixCache implements PageReclaimer {
  /** One tree per namespace: '' for the base model, a loaded adapter's key for its sequences. */
  private readonly roots = new Map<string, Node>();
  private readonly byPage = new Map<number, Node>();
  private clock = 0;
  /**
   * Called as a page enters the tree, with the ids up to its end (its own copy), its namespace and
   * whether marks (image positions) key part of its prefix: KV persistence (./kv-persist.ts) copies it out behind the step that
   * filled it.
   */
  onCached: ((page: number, ids: readonly number[], namespace: string, node: PrefixNode, marked: boolean) => void) | null = null;
  /** Called as a node leaves the tree (evicted, cleared, its namespace dropped): a hybrid's state snapshot goes with it (./state-snapshots.ts). */
  onRemoved: ((node: PrefixNode) => void) | null = null;

  constructor(private readonly kv: KvPages) {
    kv.setReclaimer(this);
  }

  /** Pages the tree holds. */
  get size(): number {
    return this.byPage.size;
  }


  private rootOf(namespace: string): Node {
    let root = this.roots.get(namespace);
    if (!root) this.roots.set(namespace, (root = { page: -1, key: namespace, parent: null, children: new Map(), lastUse: 0 }));
    return root;
  }

  /** A page's key: its ids, an image token's replaced by its key in `marks` (the image's content hash and index). */
  private keyOf(ids: readonly number[], page: number, marks?: ReadonlyMap<number, string>): string {
    const ps = this.kv.pageSize;
    const part = ids.slice(page * ps, (page + 1) * ps);
    return (marks ? part.map((id, i) => marks.get(page * ps + i) ?? id) : part).join(',');
  }

  /**
   * The cached pages of `ids`' longest prefix of whole pages, at most `maxTokens` tokens long
   * (a prompt keeps at least its last token to compute, for its logits). Marks them used now.
   */
  match(ids: readonly number[], maxTokens: number, namespace = '', marks?: ReadonlyMap<number, string>): number[] {
    return this.path(ids, maxTokens, namespace, marks).map((n) => n.page);
  }

  /** As `match`, the nodes of the path (a hybrid's match ends at the deepest one holding a state snapshot). */
  path(ids: readonly number[], maxTokens: number, namespace = '', marks?: ReadonlyMap<number, string>): Array<PrefixNode & { readonly page: number }> {
    const ps = this.kv.pageSize;
    const nodes: Node[] = [];
    let node = this.rootOf(namespace);
    const now = ++this.clock;
    for (let p = 0; (p + 1) * ps <= Math.min(maxTokens, ids.length); p++) {
      const child = node.children.get(this.keyOf(ids, p, marks));
      if (!child) break;
      child.lastUse = now;
      nodes.push(child);
      node = child;
    }
    return nodes;
  }

  /** The node of the cursor's path holding its `pages`-th page (1-based), or null when the path is not that long. */
  nodeAt(cursor: PrefixCursor, pages: number): PrefixNode | null {
    if (pages < 1 || pages > cursor.pages || !this.holds(cursor.node)) return null;
    let node: Node = cursor.node;
    for (let d = cursor.pages; d > pages; d--) node = node.parent!;
    return node;
  }

  /** Where a sequence's pages stop in the tree, so offering its next page starts there. */
  cursor(namespace = ''): PrefixCursor {
    const root = this.rootOf(namespace);
    return { node: root, pages: 0, root };
  }

  /**
   * Offers the full pages of a sequence holding `ids` in `table` (page i holds ids[i·ps, (i+1)·ps)),
   * from `cursor` on (the pages offered before), up to the first `limit` tokens (those whose K/V
   * the sequence holds). Pages whose prefix the tree lacks enter it; where
   * it already holds the same prefix in another page (two sequences computed it side by side), the
   * tree keeps its own and the sequence's copy stays private to it. Returns the new cursor.
   */
  extend(ids: readonly number[], table: readonly number[], cursor: PrefixCursor, limit = ids.length, marks?: ReadonlyMap<number, string>): PrefixCursor {
    const ps = this.kv.pageSize;
    const full = Math.min(table.length, Math.floor(Math.min(limit, ids.length) / ps));
    let { node, pages } = cursor;
    const { root } = cursor;
    // The cursor's node left the tree (evicted while only its twin page was in use): start again.
    if (node !== root && this.byPage.get(node.page) !== node) (node = root), (pages = 0);
    const now = ++this.clock;
    for (let p = pages; p < full; p++) {
      const key = this.keyOf(ids, p, marks);
      let child = node.children.get(key);
      if (!child) {
        const page = table[p]!;
        child = { page, key, parent: node, children: new Map(), lastUse: now };
        node.children.set(key, child);
        this.byPage.set(page, child);
        this.kv.markCached(page);
        this.onCached?.(page, ids.slice(0, (p + 1) * ps), root.key, child, marks !== undefined && [...marks.keys()].some((pos) => pos < (p + 1) * ps));
      } else {
        child.lastUse = now;
      }
      node = child;
    }
    return { node, pages: Math.max(pages, full), root };
  }

  /** Whether `node` is still in the tree (its page still holds its prefix's K/V). */
  holds(node: PrefixNode): boolean {
    const n = node as Node;
    return this.byPage.get(n.page) === n;
  }

  /**
   * Evicts up to `n` unreferenced pages, least recently used leaves first; returns how many. An
   * unreferenced page may have referenced descendants where a sequence's path runs through a node
   * whose page it does not hold (it computed its own copy: a twin computing the same page, or a
   * hybrid's match that stopped at the last page with a state snapshot): with no unreferenced leaf
   * left, the least recently used such node goes with its subtree (the pages sequences hold stay
   * theirs; their next offer walks the tree again), so every idle page counted available is.
   */
  reclaim(n: number): number {
    let freed = 0;
    while (freed < n) {
      let victim: Node | null = null;
      let inner: Node | null = null;
      for (const node of this.byPage.values()) {
        if (this.kv.refCount(node.page) !== 0) continue;
        if (node.children.size === 0 && (!victim || node.lastUse < victim.lastUse)) victim = node;
        if (!inner || node.lastUse < inner.lastUse) inner = node;
      }
      if (victim) {
        this.remove(victim);
        freed++;
      } else if (inner) {
        freed += this.removeSubtree(inner);
      } else break;
    }
    return freed;
  }

  /** Removes `node` and every node under it; returns the pages that went back to the pool (those no sequence holds). */
  private removeSubtree(node: Node): number {
    node.parent!.children.delete(node.key);
    let freed = 0;
    const stack = [node];
    for (let x = stack.pop(); x; x = stack.pop()) {
      stack.push(...x.children.values());
      if (this.kv.refCount(x.page) === 0) freed++;
      this.byPage.delete(x.page);
      this.kv.uncache(x.page);
      this.onRemoved?.(x);
    }
    return freed;
  }

  /** Forgets everything (pages no sequence uses go back to the pool). */
  clear(): void {
    for (const node of [...this.byPage.values()]) {
      this.kv.uncache(node.page);
      this.onRemoved?.(node);
    }
    this.byPage.clear();
    this.roots.clear();
  }

  /** Forgets one namespace's pages (an adapter unloaded: no later sequence can match them). */
  drop(namespace: string): void {
    const root = this.roots.get(namespace);
    if (!root) return;
    const stack = [...root.children.values()];
    for (let n = stack.pop(); n; n = stack.pop()) {
      stack.push(...n.children.values());
      this.byPage.delete(n.page);
      this.kv.uncache(n.page);
      this.onRemoved?.(n);
    }
    this.roots.delete(namespace);
  }

  private remove(node: Node): void {
    node.parent!.children.delete(node.key);
    this.byPage.delete(node.page);
    this.kv.uncache(node.page);
    this.onRemoved?.(node);
  }
}
