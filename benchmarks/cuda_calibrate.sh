#!/usr/bin/env bash
# Calibrate and validate on a CUDA GPU in one go; every result lands as JSON under $WORK (default /tmp/roofline-cuda),
# packed after each step into $OUT/results.tgz when OUT is set.
#
#   STEPS="graphs quick serving whole" benchmarks/cuda_calibrate.sh   # needs torch with CUDA and roofline importable
#
# On an H100 "graphs quick whole serving" with WHOLE_MODELS=llama-3.1-8b took 4-5 minutes (30 s, 100-118 s, 45 s,
# 60 s); "quick serving whole" with two whole models 4 min 10 s; on an H200 "quick serving_whole partitions whole"
# 5 min 24 s (161, 18, 42, 23 and 4 x 16-20 s), with the whole-depth grid rows "quick serving_whole whole again"
# 9 min (197, 19, 39, 4 x 16-24 and 197 s); with the passes a grid apart "quick serving_whole whole" and
# WHOLE_MODELS=qwen2.5-7b 5 min (201, 20, 35, 15, 16 s), "again serving_whole" 3 min 10 s (155-158 and 32-34 s), all
# three on one H200 in 12.5 minutes held; "datasheet" adds about 30 s and "full" about
# 5 minutes (docs/calibration.md). A fresh device machine lacks pydantic: carry its wheels.
#
# graphs: benchmarks/cuda_graphs.py's decode targets (CUDA graphs and eager); datasheet: validate on fresh engine
# shapes with the bundled datasheet card (default efficiencies); quick / full: calibrate, then validate again with the
# calibrated card; again: a second quick calibration on the same machine (into $WORK/again: the spread of two);
# serving: validate --serving's two specs with every step logged (benchmarks/serving_whole.py: the CPU's two-layer
# cut, then the GPU's whole qwen2.5-7b); serving_whole: the GPU's spec alone; whole: whole cards run by the engine
# beside the calibrated prediction; partitions: decode steps under the split kernel's partition policies
# (benchmarks/decode_partitions.py). Each step has its own time limit so one slow step cannot take the rest.
# HW names the datasheet card where the GPU's name matches none (an H200 NVL: HW=h200).
set -uo pipefail
WORK=${WORK:-/tmp/roofline-cuda}
STEPS=${STEPS:-"graphs datasheet quick full serving whole"}
mkdir -p "$WORK"
export PYTHONUNBUFFERED=1
RL="python3 -m roofline --debug"  # --debug: a failure leaves its traceback in NAME.err
run() {  # run NAME SECONDS CMD...: stdout -> $WORK/NAME.json, stderr -> $WORK/NAME.err, wall time and exit code
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$WORK/$name.json" 2>"$WORK/$name.err"
  echo "$name: exit $? in $((SECONDS - t0)) s" | tee -a "$WORK/log.txt"
  if [ -n "${OUT:-}" ]; then tar czf "$OUT/results.tgz" -C "$WORK" .; fi
}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$WORK/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())" | tee -a "$WORK/gpu.txt"
HW=${HW:-$(python3 -c "from roofline.engine.device import name; from roofline.cards.store import CardStore; print(CardStore().hardware(name('cuda')).name)")}
export HW
echo "datasheet card: $HW" | tee -a "$WORK/gpu.txt"
for step in $STEPS; do
  case $step in
    datasheet) ROOFLINE_HOME="$WORK/none" run validate_datasheet 150 $RL validate --hw "$HW" --engine-shapes --device cuda --dtype bf16 --json ;;
    quick) export ROOFLINE_HOME="$WORK/quick"
      run calibrate_quick 260 $RL calibrate --device cuda --quick --json
      run validate_quick 100 $RL validate --hw "$HW" --engine-shapes --device cuda --json ;;
    again) ROOFLINE_HOME="$WORK/again" run calibrate_again 260 $RL calibrate --device cuda --quick --json ;;
    full) export ROOFLINE_HOME="$WORK/full"
      run calibrate_full 400 $RL calibrate --device cuda --json
      run validate_full 150 $RL validate --hw "$HW" --engine-shapes --device cuda --json ;;
    graphs) run graphs 90 python3 benchmarks/cuda_graphs.py --skip-calibrate ;;
    partitions) run partitions 120 python3 benchmarks/decode_partitions.py ;;
    serving) export ROOFLINE_HOME="$WORK/${CARD_DIR:-quick}"
      run serving 75 python3 benchmarks/serving_whole.py --cut ;&  # then the GPU's spec, below
    serving_whole) export ROOFLINE_HOME="$WORK/${CARD_DIR:-quick}"
      run serving_whole 100 python3 benchmarks/serving_whole.py ;;
    whole) export ROOFLINE_HOME="$WORK/${CARD_DIR:-quick}"
      for m in ${WHOLE_MODELS:-llama-3.1-8b gemma-3-4b}; do for b in 1 16; do
        run "engine_${m}_b$b" 45 $RL engine run --device cuda --dtype bf16 --model "$m" --prompt 1024 --output 64 \
          --batch $b --hw "$HW" --json
      done; done ;;
  esac
done
