#!/bin/sh
# bench/quiet.sh: the figures of issue 26 in one run, for a quiet machine.
#
# Runs BenchmarkBinary on stdio and through --daemon, each workload
# (zeros, yes, seq) and the spawn -count 5 times (QUIET_COUNT); every run
# interleaves the binary with the raw drain of the same command, in a
# process of its own. Prints nproc and the load average before and after,
# the benchmark's own output, and one table of medians against raw, in
# bench/README.md's format. About 4 minutes on a quiet 2-core machine,
# 10 at load average 15: each throughput run is 1 iteration (the agent,
# then the raw drain), each spawn run QUIET_SPAWNS spawns of each. Usage,
# from anywhere in the module:
#
#	sh bench/quiet.sh 2>&1 | tee quiet.txt
set -eu

count=${QUIET_COUNT:-5}
spawns=${QUIET_SPAWNS:-200}
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

go test -c -o "$dir/bench.test" ./bench/
go build -o "$dir/shellagent" ./cmd/shellagent
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "commit $commit; $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s)

run() { # benchtime pattern
	SHELLAGENT_BENCH_BINARY="$dir/shellagent" "$dir/bench.test" -test.run '^$' \
		-test.bench "$2" -test.benchtime "$1" -test.count "$count" | tee -a "$dir/out.txt"
}
# One pattern per depth: a leaf above a pattern's last level does not run.
run 1x '^BenchmarkBinary$/^(zeros|yes|seq)$'
run 1x '^BenchmarkBinary$/^daemon$/^(zeros|yes|seq)$'
run "${spawns}x" '^BenchmarkBinary$/^spawn$'
run "${spawns}x" '^BenchmarkBinary$/^daemon$/^spawn$'

echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); $(($(date +%s) - start)) s"
if grep -q '^--- FAIL\|^FAIL' "$dir/out.txt"; then
	echo "A BENCHMARK FAILED (above): the table lacks its runs."
fi
echo
awk -v count="$count" '
# median of the values of key k
function median(k,    n, i, j, v, a) {
	n = num[k]
	for (i = 1; i <= n; i++) a[i] = val[k, i]
	for (i = 2; i <= n; i++) { v = a[i]; for (j = i - 1; j > 0 && a[j] > v; j--) a[j + 1] = a[j]; a[j + 1] = v }
	lo[k] = a[1]; hi[k] = a[n]
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
/^BenchmarkBinary\// {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
	if (!(name in seen)) { seen[name] = 1; names[++nn] = name }
	for (i = 3; i < NF; i += 2) { k = name SUBSEP $(i + 1); val[k, ++num[k]] = $i }
}
END {
	print "| benchmark (medians of " count " runs) | raw | shellagent | shellagent vs raw (range) | target | | load1 |"
	print "| --- | --- | --- | --- | --- | --- | --- |"
	for (x = 1; x <= nn; x++) {
		n = names[x]
		daemon = n ~ /daemon/
		label = n (daemon ? "" : " (stdio)")
		load = median(n SUBSEP "load1")
		if (n ~ /spawn$/) {
			over = median(n SUBSEP "p50_over_raw_us")
			printf "| %s, p50 to the first byte | %.2f ms | %.2f ms | %+.2f ms (%+.2f to %+.2f) | ≤ +1 ms | %s | %.1f |\n", label,
				median(n SUBSEP "raw_p50_us") / 1000, median(n SUBSEP "p50_us") / 1000,
				over / 1000, lo[n SUBSEP "p50_over_raw_us"] / 1000, hi[n SUBSEP "p50_over_raw_us"] / 1000,
				(over <= 1000 ? "met" : "**not met**"), load
		} else {
			target = daemon ? 0.85 : 0.90
			r = median(n SUBSEP "ratio_vs_raw")
			printf "| %s | %.1f MB/s | %.1f MB/s | %.2f (%.2f–%.2f) | ≥ %.2f | %s | %.1f |\n", label,
				median(n SUBSEP "raw_MB/s"), median(n SUBSEP "agent_MB/s"),
				r, lo[n SUBSEP "ratio_vs_raw"], hi[n SUBSEP "ratio_vs_raw"], target,
				(r >= target ? "met" : "**not met**"), load
		}
	}
}' "$dir/out.txt"
