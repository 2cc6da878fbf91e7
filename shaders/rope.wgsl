// Rotary position embedding, in place on q [T, nHeads, headDim] and k [T, nKv, headDim].
// One invocation per rotated pair: pair i of a head turns by angle = pos * invFreq[i] and is
// multiplied by mscale (LongRoPE's attention factor, else 1). Only each head's first rotaryDim
// dimensions rotate (partial rotary, Phi-4-mini); the others are left as they are.
// invFreq is computed on the CPU at load (it folds in any rope scaling), so this kernel is generic.
alias act = f32;

override WG: u32 = 64;
// 0 = neox: pairs (i, i + headDim/2); 1 = interleaved: pairs (2i, 2i + 1).
override STYLE: u32 = 0;

struct Params {
  nHeads: u32,     // query heads per token
  nKv: u32,        // key heads per token
  headDim: u32,    // elements per head
  rotaryDim: u32,  // leading elements of a head that rotate (even, <= headDim)
  mscale: f32,     // cos and sin multiplied by it
}

@group(0) @binding(0) var<storage, read_write> q: array<act>;
@group(0) @binding(1) var<storage, read_write> k: array<act>;
@group(0) @binding(2) var<storage, read> positions: array<u32>;  // [T] position in its sequence
@group(0) @binding(3) var<storage, read> invFreq: array<f32>;    // [rotaryDim / 2]
@group(0) @binding(4) var<uniform> p: Params;

// KV folds kv_write (shaders/kv_write.wgsl) into the rotation, saving its dispatch: k's rotated
// pairs go straight into the layer's paged cache at slotMapping[t] (k itself is left as it was:
// only the cache is read after this), and invocations past the q/k pairs copy v's rows there, a
// pair of elements each, and k's elements past rotaryDim. Without KV these four bindings are
// 4-byte dummies. v is only read, but bound read_write: it may be a region of the buffer q and k
// live in, and one dispatch may not use a buffer both as writable and as read-only storage.
override KV: bool = false;
@group(0) @binding(5) var<storage, read_write> v: array<act>;           // [T, nKv, headDim]
@group(0) @binding(6) var<storage, read> slotMapping: array<u32>;       // [T] page * PAGE + offset
@group(0) @binding(7) var<storage, read_write> kCache: array<act>;      // [numPages, PAGE, nKv, headDim]
@group(0) @binding(8) var<storage, read_write> vCache: array<act>;

// GPU sin/cos promise only 2^-11 absolute error, and only on [-pi, pi] (SwiftShader really is
// that coarse), while angles reach pos * invFreq[0] = pos. So the angle is the f32 product, as in
// HF, and its sine and cosine are computed here: an exact reduction by pi/2 (Cody-Waite: P1 and P2
// carry 6 and 7 significant bits, so n * P1 and n * P2 are exact for n < 2^17, i.e. angles up to
// ~2e5), then Taylor polynomials on [-pi/4, pi/4], good to f32 rounding.
const TWO_OVER_PI = 0.6366197466850281;
const P1 = 1.5625;
const P2 = 0.00830078125;
const P3 = -4.454454938240815e-6;

// (cos a, sin a)
fn cosSin(a: f32) -> vec2f {
  let n = round(a * TWO_OVER_PI);
  let r = ((a - n * P1) - n * P2) - n * P3;
  let r2 = r * r;
  let s = r * (1.0 + r2 * (-1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (1.0 / 362880.0)))));
  let c = 1.0 + r2 * (-0.5 + r2 * (1.0 / 24.0 + r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0 + r2 * (-1.0 / 3628800.0)))));
  // a = n * pi/2 + r: rotate (cos r, sin r) by the quadrant n mod 4.
  switch (i32(n) & 3) {
    case 0: { return vec2f(c, s); }
    case 1: { return vec2f(-s, c); }
    case 2: { return vec2f(-c, -s); }
    default: { return vec2f(s, -c); }
  }
}

// Indices of the pair `j` within a head.
fn pairOf(j: u32) -> vec2u {
  if (STYLE == 0u) { return vec2u(j, j + p.rotaryDim / 2u); }
  return vec2u(2u * j, 2u * j + 1u);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(workgroup_id) wg: vec3u) {
  let half = p.rotaryDim / 2u;
  let pairs = (p.nHeads + p.nKv) * half;
  let i = gid.x;
  let t = wg.y;
  if (KV && i >= pairs) {
    let row = p.nKv * p.headDim;
    let e = 2u * (i - pairs);
    if (e >= row) { return; }
    let src = t * row + e;
    let dst = slotMapping[t] * row + e;
    vCache[dst] = v[src];
    vCache[dst + 1u] = v[src + 1u];
    if (e % p.headDim >= p.rotaryDim) {
      kCache[dst] = k[src];
      kCache[dst + 1u] = k[src + 1u];
    }
    return;
  }
  if (i >= pairs) { return; }
  let head = i / half;
  let j = i % half;
  let cs = cosSin(f32(positions[t]) * invFreq[j]);
  let c = cs.x * p.mscale;
  let s = cs.y * p.mscale;
  let pair = pairOf(j);
  if (head < p.nHeads) {
    let base = (t * p.nHeads + head) * p.headDim;
    let x0 = f32(q[base + pair.x]);
    let x1 = f32(q[base + pair.y]);
    q[base + pair.x] = act(x0 * c - x1 * s);
    q[base + pair.y] = act(x0 * s + x1 * c);
  } else {
    let kh = head - p.nHeads;
    let base = (t * p.nKv + kh) * p.headDim;
    let x0 = f32(k[base + pair.x]);
    let x1 = f32(k[base + pair.y]);
    let r0 = act(x0 * c - x1 * s);
    let r1 = act(x0 * s + x1 * c);
    if (KV) {
      let dst = (slotMapping[t] * p.nKv + kh) * p.headDim;
      kCache[dst + pair.x] = r0;
      kCache[dst + pair.y] = r1;
    } else {
      k[base + pair.x] = r0;
      k[base + pair.y] = r1;
    }
  }
}
