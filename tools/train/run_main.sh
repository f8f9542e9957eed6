#!/bin/sh
# Start or resume the long training run in the background, in its own session (setsid) so it
# outlives the shell that started it. The same command does both: train.py continues from
# runs/main/ckpt.pt when it exists. One thread; output appended to
# runs/main/train.log, rows and evaluations in runs/main/log.jsonl, PID in runs/main/pid.
# Settings chosen from the short runs recorded in README.md; change them only for a new run.
set -e
cd "$(dirname "$0")/../.."
RUN=tools/train/runs/main
mkdir -p "$RUN"
if [ -f "$RUN/pid" ] && kill -0 "$(cat "$RUN/pid")" 2>/dev/null; then
  echo "already running: PID $(cat "$RUN/pid")"; exit 0
fi
[ -f tools/train/runs/data/tok.model ] || /usr/bin/python3 tools/train/prepare_data.py --out tools/train/runs/data
setsid nohup /usr/bin/python3 tools/train/train.py --run "$RUN" --preset main --seed 1 \
  --lr "${LR:-1e-3}" --warmup 100 --batch-tokens 2048 --threads 1 "$@" >> "$RUN/train.log" 2>&1 &
echo $! > "$RUN/pid"
echo "started PID $(cat "$RUN/pid"); log $RUN/train.log, checkpoint $RUN/ckpt.pt"
