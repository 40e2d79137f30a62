#!/usr/bin/env bash
# Where a process's CPU goes, all of its threads together (GC helpers and
# the kernel included, which --cpu-prof does not see), from a Linux `perf`
# recording. Start the target with BENCH_NODE_ARGS=--perf-basic-prof so JIT
# frames have names, load it, then:
#
#   perf record -F 4000 -g -p <pid> -o edge.data -- sleep 6
#   bash bench/profile/perf-areas.sh edge.data
#
# prints each area's share of the samples: our and Node's JS (JIT code),
# V8's builtins, inline caches, runtime, compiler and garbage collector
# (marking, sweeping and scavenging, on any thread), Node's C++, libc's
# allocator and copies, and the kernel. docs/benchmarks.md ("CPU budget")
# used it for the old-generation floor of runtime.node_flags.
set -euo pipefail
data=${1:?usage: perf-areas.sh PERF_DATA}
perf report -i "$data" --no-children --sort sym -g none | grep -v '^#' | grep '%' | awk '
{
  p = $1; sub("%", "", p); line = $0; c = "other native"
  if (line ~ /\[k\]/) c = "kernel"
  else if (line ~ /JS:/) c = "JS (JIT code: ours, Node, packages)"
  else if (line ~ /RegExp\./) c = "regexp code"
  else if (line ~ /compiler::|Turbofan|Maglev|maglev|turboshaft|Compile/) c = "V8 compiler"
  else if (line ~ /Scaveng|Mark|Sweep|[^a-zA-Z]Heap::(Collect|Perform|GarbageCollection)|GC|Evacuat|Concurrent|RememberedSet|SizeFromMap|IteratePointers|BodyDescriptor|Worklist|Compact|Visitor|SlotSet|MemoryAllocator|PageMetadata|MemoryChunk/) c = "V8 garbage collector"
  else if (line ~ /Builtins_RecordWrite/) c = "V8 write barrier"
  else if (line ~ /Builtins_.*IC/) c = "V8 inline caches"
  else if (line ~ /Builtins_/) c = "V8 builtins"
  else if (line ~ /malloc|free|memmove|memcpy|memset|_int_/) c = "libc memory"
  else if (line ~ /v8::internal/) c = "V8 runtime"
  else if (line ~ /node::|uv_|uv__|nghttp2/) c = "Node C++, libuv, nghttp2"
  share[c] += p; total += p
}
END { for (k in share) printf "%6.1f %%  %s\n", share[k] * 100 / total, k }' | sort -rn
