#!/usr/bin/env bash
# The GPU pack's entry point (npm run gpu-pack -- DIR copies this to DIR/run.sh), for a linux-x64 GPU
# host with a driver and no Node, npm or network:
#   DIR/run.sh selfcheck [ARGS]   is this GPU computing the model correctly? (webgpu-llm selfcheck ARGS)
#   DIR/run.sh bench [ARGS]       the benchmark in Node on Dawn (npm run bench -- --target node ARGS)
#   DIR/run.sh fixtures [ARGS]    write the bench's fixture files (one process per format, at once)
# Unpacks once into a folder named by the pack's contents, finds the Vulkan driver, prints it, and
# writes the reports (JSON and the log) under $OUT (default DIR/out). It runs the pack's own Node,
# never a `node` or `npm` found on PATH.
set -uo pipefail
k=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-}; shift || true
case "$cmd" in selfcheck|bench|fixtures) ;; *) echo "usage: $0 selfcheck|bench|fixtures [ARGS]" >&2; exit 2 ;; esac
o=${OUT:-$k/out}; mkdir -p "$o"
w=${TMPDIR:-/tmp}/webgpu-llm-pack-$(cat "$k/node.xz" "$k/tree.tar.xz" | cksum | cut -d' ' -f1)
if [ ! -d "$w" ]; then
  # Unpacked beside, then renamed: runs started together (fixtures beside selfcheck) never see half a folder.
  t=$w.tmp.$$; rm -rf "$t"; mkdir -p "$t" || exit 1
  xz -dc "$k/node.xz" > "$t/node" && chmod +x "$t/node" && tar -C "$t" -xJf "$k/tree.tar.xz" || { echo "run.sh: could not unpack into $t" >&2; exit 1; }
  mv -T "$t" "$w" 2>/dev/null || rm -rf "$t"
fi
node=$w/node
tree=$w/tree/src/testing/fixtures
# The Vulkan loader and the GL dispatch libraries NVIDIA's driver loads: the host's, else the pack's.
for group in vulkan glvnd; do
  first=$(ls "$k/lib/$group" 2>/dev/null | head -1)
  [ -n "$first" ] || continue
  if ! ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$first "; then
    export LD_LIBRARY_PATH=$k/lib/$group${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "[pack] $group libraries: the pack's ($k/lib/$group)"
  fi
done
# The driver: VK_ICD_FILENAMES as given, else NVIDIA's ICD, else the first other hardware ICD.
if [ -z "${VK_ICD_FILENAMES:-}" ]; then
  for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json \
             $(ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json 2>/dev/null | grep -Eiv 'lvp|swiftshader|mock'); do
    [ -f "$icd" ] && { export VK_ICD_FILENAMES=$icd VK_DRIVER_FILES=$icd; break; }
  done
fi
# NVIDIA's ICD names its library without a path: where the driver is mounted apart (containers), its libraries are there.
case "${VK_ICD_FILENAMES:-}" in /usr/local/nvidia/*) export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/nvidia/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ;; esac
echo "[pack] Vulkan driver: ${VK_ICD_FILENAMES:-the loader default}"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1 | sed 's/^/[pack] nvidia-smi: /'
quiet() { grep --line-buffered -v 'XDG_RUNTIME_DIR'; }

# Arguments a bench run names (its fixture's preset, architecture and formats), for `fixtures`.
arg() { local name=$1 def=$2; shift 2; local v=$def; while [ $# -gt 0 ]; do [ "$1" = "$name" ] && [ $# -gt 1 ] && v=$2; shift; done; echo "$v"; }
write_fixtures() {
  local emulated=1b; case "${VK_ICD_FILENAMES:-}" in *swiftshader*|*lvp*) emulated=small ;; esac
  local preset arch formats pids=() f status=0
  preset=$(arg --preset "$emulated" "$@"); arch=$(arg --arch llama "$@"); formats=$(arg --formats Q4_0,Q4_K,Q8_0,Q4_K_M,F16 "$@")
  for f in ${formats//,/ }; do
    "$node" "$tree/bench.mjs" --fixtures-only --preset "$preset" --arch "$arch" --formats "$f" 2>&1 | quiet &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  return $status
}

case "$cmd" in
  selfcheck)
    # The table on stderr (shown and logged), the JSON report in a file.
    "$node" "$tree/cli.mjs" selfcheck --json "$@" > "$o/selfcheck.json" 2> >(quiet | tee "$o/selfcheck.log" >&2)
    status=$?; wait; exit $status ;;
  fixtures)
    write_fixtures "$@" 2>&1 | tee "$o/fixtures.log"; exit "${PIPESTATUS[0]}" ;;
  bench)
    write_fixtures "$@" 2>&1 | tee "$o/fixtures.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
    "$node" "$tree/bench.mjs" --target node "$@" --json "$o/bench.json" 2>&1 | quiet | tee "$o/bench.log"
    exit "${PIPESTATUS[0]}" ;;
esac
