// `tangram bench-serve --soak DURATION`: a soak benchmark of `tangram serve`. It starts the
// server as a child process (server_process.h; --kv-disk in a temporary folder, so sessions
// outlive restarts) and drives it for DURATION with the seeded client mix of
// evaluation/soak_load.h, restarting it every --soak-restart-every (SIGTERM; every third restart
// kill -9) while the clients carry on. Every --soak-sample it samples the server's RSS
// (/proc/<pid>/status) and GET /metrics. At the end it DELETEs every session, waits for the
// server to drain, and judges:
//   - no request answered 5xx;
//   - no server ended other than by the soak's own hand (a SIGTERM must end in exit 0);
//   - no request that must fail succeeded;
//   - KV pages in use back to where they were before the load, nothing in flight or running;
//   - no server process grew its RSS after its warm-up by more than --soak-rss-growth.
// Outputs in --out: report.json (every sample, restart and count), report.md, soak.svg (RSS and
// KV pages over time), server.log; a "soak verdict: PASS|FAIL" line on stdout; exit 1 on FAIL.
#pragma once

#include "benchmark/serve_bench.h"
#include "common/result.h"

namespace tangram::bench {

// Refuses the flags that mean nothing to a soak (--url, --rates, ...), and the --soak-* flags
// without --soak, rather than ignoring them.
Status check_soak_flags(const BenchServeOptions& opt);

// Runs the soak: true when its verdict is PASS; an error when it could not run to the end.
Result<bool> run_soak(const BenchServeOptions& opt);

}  // namespace tangram::bench
