"""The prose of docs/runtimes.md that benchmarks/fit_runtimes.py writes around its generated tables: the systematic
causes found in the residuals (what was fixed, and what was tried and not kept, with its held-out figures) and the
rule that picks which fit ships."""

CAUSES = """## Systematic causes found in the residuals

- **All-reduce latency under tensor parallelism (vLLM, SGLang, TensorRT-LLM).** vLLM 0.10 on 8x MI300X (TP 8,
  `published_more.csv` M001-M032) finished a 70B batch-1 request 2.5x faster than predicted: 11 of the 21 ms
  predicted per decode step were link latency, charged as a ring all-reduce's 2(n-1) = 14 hops per all-reduce, 160
  all-reduces a step. These runtimes run small all-reduces with their own one-shot kernels (each GPU reads its peers
  directly), so a profile now sets `allreduce_latency_hops: 1` (the generic prediction keeps the ring). The rest of
  that gap is per-kernel launch cost under CUDA/HIP graphs, which the profiles do not fit yet. The one-shot kernel
  needs every peer on NVLink/xGMI: over PCIe beyond two GPUs vLLM refuses it ("not supported on more than two
  PCIe-only GPUs") and runs NCCL's ring, which the prediction now charges there (vLLM on 4-8 PCIe A100s/A10s,
  Q411-Q419, had read up to 4.5x fast).
- **llama.cpp quantized prefill changed kernels in June 2024.** Before, prompts above a small batch were
  dequantized and run on FP16 cuBLAS; PRs #7676, #7860 and #8062 rewrote MMQ on int8 tensor cores (1.5-2x the old
  rate at the default microbatch 512, far below it at microbatch 16-32, M046-M047), and PR #8075 (merged 2024-06-24
  as build b3216) made MMQ the default for quantized prompts on Turing and newer. The llama.cpp profile's version
  entry `b3216` carries `refits: {nvidia-gpu: [compute_by_format]}`, so policy "versions" fits the NVIDIA prompt
  kernels of the 2024-01/2024-05 rows (C098-C108, H054-H055) apart from those of June 2024 on (M043-M048).
- **MLX 4-bit decode changed kernels in March 2024.** MLX PR #786 (merged 2024-03-06, in mlx 0.6.0 of 2024-03-07)
  rewrote the quantized matrix-vector kernel: Mistral 7B 4-bit decode went from 54 to 74 tok/s. The mlx-examples
  PR #515 rows (M051-M052, 2024-03-02) ran the old kernel at a quarter of the bandwidth the later rows reach; the
  mlx profile's version `0.1.0` (first mlx-lm after mlx 0.6.0) carries `refits: {apple-soc: [memory,
  compute_by_format]}`. The old range has one source only, so it keeps the runtime-wide fit (a range needs
  3 rows from 2 sources), and no other document can judge it: those two rows stay far off under any fit.
- **Ollama runs llama.cpp's kernels.** Ollama vendors ggml; its profile says `kernels_from: llama.cpp`, so its
  fitted efficiencies are llama.cpp's for the same hardware scope (the newest version range) over its own
  num_batch, num_ctx and scheduler, and its own rows are never fitted on: held out, they are judged against a fit
  that never saw them.
- **What the version fits bought, judged leave-one-source-out.** MLX decode: 22.0% generic, 48.0% with one fit
  mixing both qmv eras, 16.5% with the version ranges (the March-2024 rows no longer drag the newer range's
  bandwidth down); MLX prefill fitted one value per format was never better than generic (a 33898-token and a
  16-token prompt cannot set one GEMM efficiency; pooled, see the MLX bullet below). llama.cpp prefill: the b3216
  split leaves the median at 30.5% (p90 93%): only Q4_0 has rows on both sides of it, and each June-2024 PR table
  is one source whose held-out rows are predicted from the other PRs at other microbatches. Ollama: llama.cpp's Spark kernels take its prefill from 75.4% to 67.0% (still far:
  the post states no prompt length); its decode keeps no fitted bandwidth (llama.cpp's made it 18.6% against 15.5%).
- **A bandwidth fit answers to the max-load rows it moves.** TensorRT-LLM's NVIDIA bandwidth fraction, fitted
  beside its max-load rows once its batch-1 rows (T001-T005) gave it a second document, came to 0.84: held out, its
  decode rows improved (12.2% -> 9.6%) and it shipped while the bandwidth kind was judged on decode rows only, but its
  max-load rows read 4.6% -> 7.0% and the serving simulation of its published rows under load (C040-C052, never fitted
  on) put ITL 8-28% long where it had read 0-20%. The bandwidth kind is now judged on the scope's max-load throughput
  rows as well (`MAX_LOAD` in `benchmarks/fit_runtimes.py`).
- **TensorRT-LLM long outputs at a fixed batch** (M041-M042, 70B at 2048/4096 output tokens) run ~50% below the
  prediction: the KV read of long decodes is slower than the bandwidth fraction fitted on 128-token outputs.
- **llama.cpp runs MXFP4 prompts on int8 tensor cores.** Its MMQ quantizes the activations to q8 and converts
  MXFP4 to int8 (PR #17906 replaced that with FP4 mma on consumer Blackwell only from build b7536). The format's own
  chain put them on the Spark's FP4 peak (500 TFLOP/s): gpt-oss prefill on the Spark (H001, H002, H006) read +41% to
  +90% generic. The llama.cpp and Ollama profiles now say `kernel_dtypes: {mxfp4: [int8, fp16, fp32]}`. The PR's own
  Spark table (native FP4, 1.23-1.29x the int8 path) is not merged: a kernel path the profile does not model yet.
- **Checkpoint layouts.** NVIDIA's NVFP4 checkpoints keep attention in BF16 (Gemma 4 31B: every `self_attn`; Nemotron
  3 Nano: the attention layers and the Mamba layers before them); rows state it in `weight_quant`, and the model
  cards list the checkpoints (`checkpoints:`), so `--model nvidia/Gemma-4-31B-IT-NVFP4` reads 31.5 GB per token,
  not 19.3.
- **Conditions a row's engine text states.** A row whose engine ran Marlin (`--linear-backend marlin`, `gptq_marlin`)
  is predicted with 16-bit math for its 4-bit weights; an offline max-load row runs at most the runtime's
  `max_num_seqs` sequences and no more than the requests it sent; a closed loop of N > 1 clients is not predicted by
  one static batch (its TTFT is a wait inside a running batch) and goes to `benchmarks/serving_published.py`.
- **Rows stating formats per component had fitted the bandwidth fraction.** A `weight_quant` written per component
  (NVIDIA's NVFP4 checkpoints: "default=nvfp4,attention=bf16,embedding=bf16"; gpt-oss "default=mxfp4,embedding=bf16")
  failed the one-format parse that picks the parameter a row informs, which then fell back to `memory`: 15 vLLM prompt
  rows (DGX Spark V047-V058, V099-V110, N014-N016; RTX PRO 6000 V004, V007) and two batch-10 decode rows were fitted
  as latency-bound decode. Such a row now informs the format of its model's largest active component (the FFN or the
  experts, where most of its GEMM FLOPs run). A row whose engine ran its 4-bit format on Marlin (every NVFP4 row on
  the Spark) enters no compute fit: its rate is Marlin's 16-bit math, not that of the FP4 kernels the format's entry
  stands for. And each kind of fitted value is now judged on its own rows: judged on every row of a metric name,
  vLLM's Spark prompt fit had fallen with the Spark's batch-1 decode rows, which its batch-10 decode rows had put
  among the compute kind's metrics. Held out, vLLM prefill 36.1% / 98.9% / +20.8% -> 29.8% / 98.9% / +20.8% (Spark
  37.3% -> 25.1%), and the Spark prompt efficiencies shipped (BF16 0.35, FP8 0.57, MXFP4 0.17). BF16's and FP8's no
  longer ship: one document set them (`MIN_SHIPPED_SOURCES`); MXFP4's (0.15, two documents) does. A row run on Marlin
  is no longer priced with its format's fitted efficiency either: that entry stands for the format's own FP4 kernels
  (vLLM's DGX Spark post, U013-U020, sets an NVFP4 one), not Marlin's 16-bit math; priced with it, djangodevreng's
  Marlin prompts had read vLLM prefill 34.2% / 62.3% / -13.3% held out, now 26.8% / 98.9% / +20.0% (Spark 24.6%, the
  post's TTFT rows 15.0% generic -> 13.6%). The seeds' Spark concurrency
  tables, never fitted on, had moved with the BF16 value's slower prefill chunks (Qwen2.5-3B at 32 and 64 clients
  +10.3% / +15.6% -> +9.5% / +14.1%) and are back at +10.3% / +15.6%.
- **Decode at batch 1 read compute-bound for GGUF weights.** A GEMM was padded to the tensor-core tile
  (`gemm_min_tokens`, 16 rows on GPUs) even at the few rows a matrix-vector kernel takes (`gemv_max_tokens`:
  llama.cpp's MMVQ up to 8): a Q4_K_M decode step paid 16x its FLOPs at the low int8 MMQ efficiency, and llama.cpp
  2025 builds on an RTX 3090 (N020-N021, 136-143 tok/s) read 42 tok/s under the b3216+ fit, 89 generic. Matrix-vector
  kernels now neither pad nor ramp: the same rows read -14% (generic defaults refitted by `fit_defaults.py`: mean
  |log error| 0.111 before the change, 0.118 after it at the old defaults, 0.116 refitted).
- **MoE prompts pay a fixed cost per expert.** At llama.cpp's `-ub 512` each expert of Qwen3-30B-A3B sees 32 tokens
  a step (gpt-oss-120b 16, gpt-oss-20b 64), below one 128-token MMQ tile (`EXPERT_TILE_TOKENS`). Fitted as their
  format's large-GEMM efficiency, two such rows (P007, P016) had taken the NVIDIA Q4_K_M efficiency from 0.24 to 0.04
  and every dense Q4_K_M prompt read ~5x slow; left out of every fit, llama.cpp's MoE prompts read +62% held out
  (median signed, 34 rows) where its dense prompts read +2.7%, and the miss was largest on the fastest cards (at
  `-ub 512`: Qwen3-30B-A3B +131% on an RTX PRO 6000 and +181% on an RTX 5090; gpt-oss-120b and Nemotron-3-Nano +4% to
  +11% on the DGX Spark), which a lower efficiency cannot produce and a fixed cost per touched expert can. ggml sorts a MoE matmul's tokens by
  expert and runs each expert's rows in tiles of their own (`expert_gemm_tiles` in the llama.cpp profile), so a step
  whose experts run matrix-matrix kernels pays `expert_gemm_overhead_s` per touched expert per layer (decode at small
  batches runs them as matrix-vector kernels and pays none). The narrow MoE rows fit it per hardware scope, the other
  parameters being fitted on the other rows, where MoE rows of two documents inform it (`MIN_EXPERT_SOURCES`: fitted
  on one document's single gpt-oss-20b row on an M1 Pro it ran to the 100 us bound and read a Qwen3-30B-A3B prompt on
  an M2 Ultra 3x slow); Ollama takes it with the kernels (`KERNEL_PARAMS`). Shipped: 6.2 us on NVIDIA GPUs, 8.9 on
  the DGX Spark, 10 on Apple, 30 on AMD GPUs and 100 (the bound) on Strix Halo, whose ROCm and Vulkan MoE prompts are
  slower still. Held out, llama.cpp prefill 22.8% / 122.2% / +5.9% -> 20.7% / 67.3% / +3.9% (RTX 5090 +181% -> +30%,
  ROCm's MI300X DeepSeek-V3 docs +398% -> -8% median, lhl's Strix Halo table +69% -> +34%, kyuz0's 38.6% -> 24.9%);
  worse: PR #24546 (RX 7900 XTX gpt-oss-20b) 5.0% -> 13.1%, the RTX PRO 6000 document's bias -5% -> -23%. Ollama
  prefill p90 367% -> 206% (median 38.9%, unchanged). Tried and not kept: the same cost fitted for vLLM and MLX on
  their narrow MoE rows (vLLM's fused MoE kernel): vLLM's Spark prompt fit no longer beat generic held out and its
  prefill went 26.8% -> 36.1%; those rows stay predicted, not fitted. Also tried, on the same rows before fitting:
  expert GEMMs padded to a 64- or 128-token tile (median +48% / +1% but 48% median |error|) and a uniform slowdown
  of the expert GEMMs (2x: +30% / 41%).
- **ggml picks one MoE kernel for every expert, on the step's tokens.** `ggml_cuda_mul_mat_id` runs the
  matrix-vector kernel over all of a MoE matmul's experts while the step holds at most 8 tokens, and the tiled MMQ
  kernel over all of them above (ggml-vulkan: the matrix-vector shader at one token only); the profiles say so with
  `expert_gemv_max_tokens` (8 for llama.cpp and Ollama, 1 for the Vulkan build). Chosen per expert on the tokens each
  one receives, a short MoE prompt ran its experts as matrix-vector kernels and paid no cost per expert, so prefill
  tok/s fell as the prompt grew (Qwen3-Next on an MI300X: 6,337 tok/s at 128 tokens, 997 at 512) where llama.cpp's
  own rows rise with it. Held out (the 413 rows of llama.cpp, its Vulkan build and Ollama, rerun alone): llama.cpp
  prefill 19.9% / 64.4% / +3.2% -> 19.9% / 60.8% / +3.2%; PR #25441's MI100 gpt-oss-20b prompts at `-ub 16` and `-ub
  32` (2-4 tokens per expert) 147.1% -> 10.2%, the ROCm docs' DeepSeek-V3 prompts on MI300X 49.1% / 331% -> 35.2% /
  87% (the shortest, 192 tok/s measured, read 1,165 and now 244); worse: the `-ub 64` gpt-oss-20b prompts on RDNA
  cards (8 tokens per expert), PR #24546 6.3% -> 13.4% and PR #18816 1.3% -> 28.1%, where the fitted AMD cost per
  expert (29 us) is more than those kernels pay; decode moved no row. The fitted costs hardly moved (AMD 29.7 ->
  29.0 us, the rest unchanged), once llama-batched-bench's batched decode rows (H021-H022) stopped informing them:
  that tool feeds every sequence token 0 (examples/batched-bench), so its sequences are copies that route to one
  sequence's experts (gpt-oss-120b decodes 32 sequences at 5.5x one's rate on the DGX Spark, beyond the ceiling of
  independent routing), and fitted, they had pulled the Spark's cost per expert to its floor. Not established: what
  a MoE decode step of 9-64 sequences pays. It now runs the tiles with the cost per expert fitted on prompts of
  16-64 tokens per expert (Qwen3-30B-A3B Q4_K_M on an RTX 4090: 13.1 ms a step at 8 sequences, 30.7 ms at 9, where
  per-expert choice read 13.9); llama.cpp PR #18958's micro-benchmark puts MMQ at 1.6-2.6x MMVQ for 4-8 tokens on
  one MUL_MAT_ID, less than this charges, and no published row measures such steps with independent sequences.
  Nor is the cost's size: one constant per scope, fitted on experts of 13-40 MB at 4 bits (gpt-oss, Qwen3-30B-A3B,
  DeepSeek-V3), it prices Qwen3-Next's 1.8 MB experts the same (an MI300X: 8 prompt tokens 10.9 ms, 16 tokens 205
  ms); a cost in proportion to the expert's bytes needs a refit.
- **llama.cpp's MMQ prompt kernels ramp with the micro-batch.** An MMQ thread block dequantizes a tile of weights once
  and multiplies it with up to 128 tokens, so a GEMM of few tokens shares that work among few. Three llama-bench
  sweeps of Llama 3 8B over `-ub` 16..512 on an RTX 4090 (PRs #7676, #7860 and #8278, in
  `benchmarks/data/mmq_microbatch_sweeps.csv`; `benchmarks/mmq_ramp.py`) are fitted by a ramp M / (M + h) with h = 36,
  44 and 44 tokens (each sweep's mean |log error| 0.08-0.12 without it, 0.016 with it). The llama.cpp profile's b3216
  entry and Ollama's profile carry `gemm_half_tokens: 44` on NVIDIA GPUs. Sweeps not fitted on, from llama.cpp PR
  #24127 (2026 MMQ, pp512 relative to `-ub 512`, `benchmarks/data/mmq_microbatch_heldout.csv`): the ramp reads an RTX
  5090's IQ2_S at `-ub` 32-256 within -2% to +10% (implied h = 31-53 tokens), an RTX 4090's Q4_K_S at `-ub` 64-256 +4%
  to +24% fast (implied h = 74-91; the 2026 kernels run its `-ub 512` a third faster than the 2024 sweep, the small
  micro-batches less so). It prices the expert GEMMs of MoE prompts (32 tokens per expert for Qwen3-30B-A3B at `-ub
  512`) and the small-microbatch rows (PR #7716 at `-ub` 16-32, M046-M047: +125% / +169% -> +22% / +54% held out).
  Held out, llama.cpp prefill 19.7% / 70.0% / +3.1% -> 17.5% / 67.5% / +4.2%; Ollama prefill 50.5% / 676% / +47.7% ->
  38.9% / 367% / +35.1% (its rows are never fitted on); RTX PRO 6000 prefill 69.7% -> 20.8%, RTX A5000 64.8% -> 44.4%,
  RTX 4090 21.5% -> 17.0%; worse: L40S 2.7% -> 8.2%, RTX 6000 Ada 36.9% -> 42.3%, H100 PCIe 62.9% -> 69.4% (May-2024
  cuBLAS rows: held out, their range takes the runtime-wide values the ramp moved), Ollama's RTX A6000 prompts 19.6%
  -> 26.5%. Two sweep documents also hold training rows (M043 is the #7676 sweep's own `-ub 512` point, M044 is from
  #7860): for those two the ramp is not held out. Tried and not kept: the ramp on the DGX Spark too (the same CUDA
  kernels; its rows run `-ub 2048` on an unfitted compute, and Spark prefill went 13.7% -> 28.3% held out), and
  fitting MoE prompt rows once the ramp prices them (llama.cpp prefill 20.3% median: the 2025 Qwen3-30B-A3B prompts
  still read +109% and +169% with the ramp, and fitted they pull the Q4_K_M efficiency down, RTX 3080 dense prompts to
  -43%).
- **llama.cpp's F16 GEMMs accumulate in FP16.** ggml-cuda's cuBLAS path asks for `CUBLAS_COMPUTE_16F` (FP32 only on
  CDNA/RDNA4), which GeForce tensor cores run at twice their FP32-accumulate rate; pro and datacenter parts run both at
  one rate. The GeForce cards carry that peak (`fp16_acc16`) and llama.cpp's and Ollama's profiles name it for F16
  weights (`kernel_dtypes: {fp16: [fp16_acc16, fp16, fp32]}`), before build b3216 for every quantized prompt too (then
  dequantized to F16 on cuBLAS). May 2024 prompts of an 8B F16 model (X rows) had read 10-30% slow on GeForce cards
  and 70-170% fast on pro ones under one fitted efficiency; an RTX 4080 reached 119% of its FP32-accumulate peak.
- **Ollama is slower than llama.cpp's kernels on the same cards.** Through its OpenAI endpoint (gparemsky, R020-R063)
  Ollama decodes 13-33% below the llama.cpp-kernel prediction on an RTX 4090, A100 and RTX A6000, and its MoE
  prompts (qwen3-30b-a3b, gpt-oss-120b) run at 15-30% of the dense-kernel rate; dense prompts match. Its own rows are
  never fitted on, so this shows as Ollama's bias. Those families ran on Ollama's own Go engine over the same ggml
  kernels from v0.11.0 (gpt-oss) and v0.12.2 (qwen3moe) until v0.30.0 made upstream llama-server its only GGUF
  engine (ollama PR #16031), and Ollama's issues report its MoE prompts slower there (#12037, #12504); no row states
  its version, so the profile keeps llama.cpp's kernels (its `uncertain` entry lists the families and versions).
- **llama.cpp's matrix-vector kernels cannot fill an HBM bus.** Its decode on A100s and H100 PCIe (XiongjieDai,
  May 2024) ran 27-48% below a prediction that on GeForce cards of the same rows is within a few percent, and the
  gap tracks bandwidth per SM: 8-11 GB/s per SM on GeForce cards, 17-19 on the A100 and H100 PCIe. MMVQ keeps a
  fixed number of loads in flight per SM, so by Little's law an SM draws at most (bytes in flight) / (memory
  latency) whatever the bus offers. `Efficiency.gemv_unit_bandwidth_bytes_per_s` caps a matrix-vector kernel at
  compute units x that rate; it and the launch cost per kernel are fitted beside `memory` on the latency-bound
  decode rows of a group with at least ten of them per extra parameter (`ROWS_PER_EXTRA`; each kept only where it
  lowers the loss, `MIN_EXTRA_GAIN`, the others refitted without it). llama.cpp on NVIDIA GPUs: 10.6 GB/s per SM, 10.6 us per kernel, memory 0.978. Held out, the
  XiongjieDai HBM rows are predicted from two other documents (D001 H100 PCIe, issue #6763; D002 A100 SXM, issue
  #2641) and the other way round: A100 PCIe decode 40.6% -> 2.3%, A100 SXM 47.9% -> 11.2%, H100 PCIe 26.5% ->
  13.6%; llama.cpp decode over all 92 rows 9.3% / p90 41.4% (90 rows, before) -> 9.5% / 34.6%. The limit is a
  property of the kernels' code, so a `kernels_from` runtime takes it from its lender whatever its own policy
  (`KERNEL_PARAMS`): Ollama keeps no llama.cpp bandwidth fraction or launch cost (its decode median is 23.5% with all
  of them lent, 23.1% with none) but takes the limit, and its gparemsky A100 rows (never fitted on) went from +69.5%
  to +17.4% median, Ollama decode from 23.1% / 92.5% / +23.1% to 21.2% / 80.5% / +16.6%.
  Fitted on MLX's 10 Apple rows the two parameters took its decode p90 from 99% to 149%, hence the row minimum.
- **llama.cpp runs every weight format's prompt through one Metal kernel.** ggml-metal instantiates one
  `kernel_mul_mm` template per weight type, each dequantizing into the same simdgroup tile, so on Apple GPUs one
  large-GEMM efficiency stands for every format (`shared_gemm_kernel: [apple-soc]` in the profile: the scope's prompt
  rows inform `compute`, not one value per format). Fitted per format, no fit beat generic on the Apple rows (42
  prompt rows from 12 documents over Q4_K_M, F16, Q8_0, Q4_0 and MXFP4; most formats held by few documents), so none
  shipped and the prompts read 20-38% slow (generic compute 0.52). Pooled, apple-soc ships compute 0.639: held out,
  M3 Max prefill 20.7% -> 5.4%, M2 Ultra 16.0% -> 12.4%, M1 Max 12.2% -> 22.2%; llama.cpp prefill over 133 rows
  21.3% / 74.2% / -6.6% -> 19.7% / 70.0% / +3.2%. The pooling was tried because the held-out Apple prompts all read
  slow: selection on the judged rows.
- **MLX runs every weight format's prompt on steel's MMA.** Its quantized matmul (`qmm_t`, mlx
  `backend/metal/kernels/quantized.h`) dequantizes each weight tile into threadgroup memory and multiplies it with
  `steel::BlockMMA`, the simdgroup MMA of its dense BF16 GEMM, so the mlx profile too says `shared_gemm_kernel:
  [apple-soc]`. Fitted per format, MLX prefill kept no value (20.1% held out against 19.4% generic, 14 rows from 7
  documents, bias -17.8%); pooled, apple-soc shipped compute 0.66 then (policy versions; 0.64 in today's
  `runtimes/mlx.yaml`): MLX prefill 19.4% / 48.9% / -17.8%
  -> 13.1% / 79.9% / +3.9%; M3 Max 27.9% -> 11.4%, M4 Max 14.5% -> 9.1%, M4 Pro 20.6% -> 6.0%, but M2 Ultra 55.5% ->
  100.6% (a 16-token BF16 prompt of a 70B model and a hybrid-Mamba prompt, both already far above generic). The
  pooling was tried because the held-out MLX prompts read slow: selection on the judged rows, as for llama.cpp's.
  Four MLX decode rows from a document not used before (mlx PR #979, April 2024: M2 Ultra, M1 Max, Mac mini M1 and
  M2, K001-K004) were added before the pooling was tried; held out they read -15%, +9%, +15% and +2%.
- **A documented per-kernel cost that made MLX worse.** mlx issue #4521 times a chain of 3,200 tiny dependent
  kernels at 8.8 ms per step on an M3 Ultra (2.75 us per kernel), far below the 20.3 us of the Apple default that
  llama.cpp rows set. As the mlx profile's `kernel_overhead_s` it fixed Qwen3-30B-A3B decode on the M4 Max (-46% ->
  +21%) but dense 7B rows went fast (M2 Ultra -15% -> +26%, M1 Max +9% -> +32%): MLX decode 14.0% -> 16.5% median
  held out, so it is not shipped. A real decode step also pays Metal command-buffer boundaries (about 20 us each,
  one or more per layer by that issue) and more dispatches per layer than roofline's operator graph counts. Fitted
  on the 12 decode rows of the newer qmv range (a range now fits its launch cost from ten rows, the CUDA-graphs
  bullet below), it is 6.6 us with memory 0.893: held out, MLX decode 14.0% / 81.3% / -0.7% -> 14.0% / 75.1% / -0.7%
  (M4 Max, the Qwen3-30B-A3B rows, 40.9% -> 20.9%), MLX prefill 13.1% / 79.9% / +3.9% -> 13.1% / 75.0% / +4.0%.
- **llama.cpp's NVIDIA decode changed with CUDA graphs.** From May 2024 (PR #6766, before b3216) a batch-1 decode
  token runs as one CUDA graph; the 2025 rows (b6413-b8322) decode MoE models 20-44% faster than a fit dominated by
  2024 rows says (Qwen3-30B-A3B on an RTX PRO 6000 and an RTX 5090). The b3216 entry also `refits: memory` on
  nvidia-gpu: the 17 later rows set their own bandwidth fraction and launch cost per kernel. A version range holds
  the per-unit matrix-vector limit at the runtime-wide value (`KERNEL_PARAMS`: a property of MMVQ's code, which the
  graphs did not change) and fits the launch cost from ten decode rows per extra parameter (`ROWS_PER_EXTRA`), as a
  runtime-wide group does; before, a range fitted the extra parameters only from 20 rows, and the later range's
  fraction sat at its bound (0.9996) absorbing the launch cost. Now it fits 7.6 us per kernel (runtime-wide 10.6 us)
  and memory 0.967. Held out, llama.cpp decode 7.3% / 34.8% / -1.6% -> 5.6% / 29.0% / +0.2% (RTX PRO 6000 30.5% ->
  20.0%, RTX 5090 35.2% -> 16.1%, RTX 3090 12.4% -> 6.5%, RTX 4090 7.1% -> 5.6%; worse: RTX A5000 13.4% -> 28.2%, a
  gpt-oss-20b row). A previous pass had found the same gain by lowering the 20-row minimum to 15 and not shipped it,
  since that number would have been chosen on the judged rows; holding the per-unit limit in a range is a rule about
  which parameters a range refits, but it was written knowing that result: selection on the judged rows.
- **Not fitted: vLLM's attention core on the DGX Spark.** vLLM 0.26's Spark prompt rows (djangodevreng, V039-V045,
  V065-V071) slow with the prompt more than the prediction does (Gemma-4-31B BF16 +37% at 4,096 tokens -> +73% at
  25,000; gpt-oss-20b +39% at 4,096, +47% to +52% beyond; the shipped profile, in sample). Per prompt token the time
  grows by 58.7 ns per token of context for Gemma 4 (its 10 global layers, 32 heads x 512, are 655k FLOP per context
  token: 11 TFLOP/s, 5% of the card's bf16 peak) and 9.0 ns for gpt-oss-20b (12 full layers, 64 x 64: 22 TFLOP/s,
  10%), against the 15% llama.cpp's depth sweep measured (the `soc` default). Head dimensions past FlashAttention's
  256 and attention sinks plausibly take another backend there, but every such row is one document: held out, nothing
  would be left to fit an attention efficiency on, so none is fitted.
- **Tried and not kept: llama.cpp's MMQ prompts at the CUDA cores' int8 rate.** Dense k-quant prompts of MMQ builds
  (b3216 on, and Ollama) on one NVIDIA GPU, 22 rows on an A100, RTX A6000, RTX 3080/3090/4090, L40S and RTX PRO 6000,
  reach 0.11-0.26 of the int8 tensor peak (spread of log 0.29) but 0.69-1.03 of the SMs' DP4A rate, 8 int8 ops per
  INT32 lane per clock (spread 0.10; `benchmarks/mmq_rate.py`): an A100 runs them at half an RTX 4090's rate, as its SMs
  x clock, not at the same rate, as its tensor peak. Cards given that rate (`int8_dp4a`, 2x or 4x the FP32 peak by
  architecture) and llama.cpp's (from b3216) and Ollama's GGUF and MXFP4 prompts run at it, refitted and held out:
  under the `versions` policy Ollama's prefill went 123.6% -> 18.0% (its A100, A6000 and 4090 rows, one document,
  agree once the A100 is not credited its tensor peak) and llama.cpp's 19.9% -> 24.8%, because a version range too
  thin to fit alone falls back on the runtime-wide efficiency, now a fraction of the DP4A rate, applied to its own
  kernels' peak: the 2024 cuBLAS-era rows (FP16 tensor math, one document) read +104% to +361%. The shipping rule then
  kept no compute fit for llama.cpp on NVIDIA GPUs (shipped prefill 19.7% -> 27.7%, Ollama's 38.9% -> 42.0%). Keeping it
  needs the fallback per kernel family (ranges sharing one kernel's rate), not per runtime.
- **Tried and not kept: one launch cost per kernel for every CUDA-graph runtime.** vLLM (from 0.2.6, PR #1926,
  2023-12), SGLang, TensorRT-LLM and lmdeploy capture decode as CUDA graphs, yet on NVIDIA GPUs they keep the generic
  13.2 us per kernel fitted on 2024 llama.cpp rows (no row of theirs fits `kernel_overhead_s`). Set to 4 us (a guess,
  not fitted) on nvidia-gpu for all four (vLLM before 0.2.6 eager at 13.2 us), held out: SGLang decode 50.9% ->
  14.1%, lmdeploy decode 32.2% -> 5.8%, vLLM batch latency on the RTX 5090 103.9% -> 9.1% (SGLang's rows and those
  16 are one document, gittensor-ai-lab/sparkinfer: Qwen3-30B-A3B on one RTX 5090), while vLLM TPOT went 6.4% -> 42.9%
  (tt-inference-server's A100 and H100 rows read 41-43% fast), TTFT 18.2% -> 25.2% and TensorRT-LLM max-load 4.6%
  -> 8.6%. Two documents pull opposite ways on the same model at batch 1 (Qwen3-30B-A3B: 4-bit on an RTX 5090 timed by
  `bench latency`, BF16 on one A100 timed by a serving benchmark's TPOT), so no one in-graph cost is established; a
  per-runtime value needs decode rows from a second document for each.
- **llama.cpp on AMD and Intel GPUs** (rows G001-G050, I001-I037, `extra/llama-cpp-amd-intel.md`: Strix Halo,
  RX 7900 XTX, AI PRO R9700, Arc A770 and B580 under ROCm, SYCL and Vulkan). Before them, llama.cpp's only AMD decode
  rows were one document's DeepSeek-V3 on 8 MI300X, whose bandwidth fraction (0.37) shipped for every AMD GPU: an RX
  7900 XTX and an R9700 would have read Llama 3 8B Q4_K_M decode at -43% and -54%; generic reads +8% and -6%, and the
  `amd-gpu` bandwidth fraction now ships none (per-value `MIN_SHIPPED_SOURCES`, and held out it was worse than
  generic). Held out: Strix Halo decode 5.2% (17 rows, 3 documents; the SoC defaults, no fitted bandwidth ships),
  prefill 166.8% -> 67.3% (`amd-soc` Q4_0 0.23, Q8_0 0.18 of the FP16 WMMA peak; the same Llama 2 7B prompt runs
  3-4x apart by backend: ROCm without and with hipBLASLt 322 vs 975 tok/s, G017/G019; Vulkan AMDVLK vs RADV 347 vs
  1338, G007/G005); Arc A770 decode 72.4% -> 4.3% (6 rows, 4 documents; `intel-gpu`
  bandwidth fraction 0.43), its prompts 1372% -> 815% (two of the four are Qwen3-30B-A3B on two A770s under Vulkan);
  the B580 (one SYCL document, I001-I002) goes from +24% / +31% generic to -34% / -84%. The fitted values mix
  backends: Vulkan on the A770 has no matrix cores (I023, "matrix cores: none"), so the one Intel prompt efficiency
  (0.031 of the int8 peak) follows the A770's Vulkan prompts and reads the B580's SYCL prompt 6x slow, and the Xe2
  B580 draws a larger share of its bus than the A770 under the one bandwidth fraction. (The Vulkan rows now have a
  profile of their own, next bullet; the figures in this one are from before it.) The `amd-soc` values are Strix
  Halo's (RDNA 3.5): the MI300A, an APU whose GPU is the MI300X's CDNA 3 at 5.3 TB/s, says so on its card
  (`efficiency_kind: gpu`) and takes the discrete-GPU defaults and the `amd-gpu` values, where Strix Halo's 100 us
  per MoE expert had put a 500-token Qwen3-30B-A3B prompt at 0.63 s under llama.cpp (0.20 s now, as on the MI300X).
- **llama.cpp's Vulkan backend is a runtime of its own** (`runtimes/llama.cpp-vulkan.yaml`; rows whose engine text
  says "llama.cpp Vulkan": 18 prompt and 15 decode rows, 8 documents). Every kernel is a ggml-vulkan shader, and its
  prompt GEMMs reach the matrix engines only where ggml enables KHR cooperative matrices: on Intel only Xe2, only from
  PR #14001 (b5589), so an Arc A770 (and a B580 before b5589) runs them on its vector units (`kernel_dtypes` at the
  FP32 peak, `devices.arc-a770`); generic reads these prompts 242% high. Held out on the same rows (median / p90 /
  signed): the 18 Vulkan prompts 52.9% / 451% / +52.9% under llama.cpp's fit -> 35.3% / 175% / +18.8% under their own,
  the 15 decodes 8.8% / 11.2% -> 6.6% / 18.0%; and the 153 prompts that stay llama.cpp's (CUDA, ROCm, Metal, SYCL)
  19.4% / 57.4% -> 17.4% / 59.3%, because the ROCm Strix Halo efficiencies no longer average over Vulkan drivers
  (`amd-soc` Q4_0 0.23 -> 0.36, Q8_0 0.18 -> 0.25 of the FP16 WMMA peak) and Intel's bandwidth fraction comes from
  SYCL decode (0.71) instead of the A770's Vulkan decode (0.43); decode 5.9% either way (106 rows). Left in the Vulkan
  prompts: the driver (AMDVLK vs RADV on one build, 347 vs 1338 tok/s, G007/G005), flash attention on an A770 without
  cooperative matrices (`-fa 1` 364 vs `-fa 0` 903 tok/s, I020/I018: a scalar attention shader roofline does not
  model), and Qwen3-30B-A3B prompts on two A770s (I014/I016, +164% held out: the cost per expert is fitted only where
  two documents' MoE rows inform it).
- **A GGUF format the rows do not inform takes its siblings' efficiency** (`compute_quantized`). llama.cpp's quantized
  types run one family of kernels (one MMQ template per ggml type under CUDA and ROCm, one `mul_mm` shader per type
  under Vulkan, `kernel_mul_mm` under Metal), so the profile says `quantized_kernel_family: true` and a format without
  a fitted value on a scope takes the geometric mean of the scope's fitted quantized formats in the same math dtype,
  not the hardware kind's prior. Held out, llama.cpp prefill 23.4% / 150.6% / +8.6% -> 22.9% / 118.5% / +7.9%:
  Strix Halo 67.3% -> 38.5% (its Q4_K_S, Q4_K_M and MXFP4 prompts had read the SoC prior, +129% to +370% in
  sample), the A770's prompts 815% -> 248%, the RX 7900 XTX 24.4% -> 22.4%. Tried and not kept for vLLM (TTFT 17.6%
  -> 16.8% held out): its one Spark MXFP4 value comes from gpt-oss MoE prompts, and carried to a dense NVFP4 prompt
  it read vLLM's Marlin W4A16 path faster than its FP4 kernels; vLLM's FP8, FP4 and Marlin GEMMs are different
  kernels, so its profile does not say `quantized_kernel_family`.
- **llama.cpp without flash attention** (`flash_attention`). Until PR #15434 made `-fa` default (b6327, Aug 2025)
  llama.cpp multiplied K by Q into fp32 scores, soft-maxed them and multiplied V by them, three kernels that write
  and read the scores (16 bytes a score, `timing.SCORE_BYTES_PER_VALUE`); what one layer's scores hold beyond the
  card's L2 goes to memory. A row's `-fa 1` / `-fa 0` / "no FA" overrides the version's default. Held out, the 41
  long (>= 2048-token) 2024 prompts went from +13.5% to +6.9% median signed error (|error| 16.6% -> 15.2%; the 43
  short ones, whose scores stay in L2, -5.4% either way): Llama 3 8B 4096-token prompts on an H100 PCIe (F16)
  +120% -> +83% and an L40S (Q4_K_M) +51% -> +26%, while Ampere's 5-6 MiB L2 parts now read some long prompts slow
  (an A6000's Llama 3 8B 4096-token prompt 0% -> -12%). llama.cpp prefill 22.9% / 118.5% / +7.9% -> 22.8% / 103.0% / +5.9%, decode 5.9% ->
  6.2% (no decode row moved by 2 points). Six Ampere cards gained their L2 size (the GA102 whitepaper's 512 KB per
  32-bit memory controller).
- **More vLLM, MLX-LM and Ollama documents** (rows U001-U022, Y001-Y026, `extra/vllm-mlx-ollama-2026.md`). MLX
  decode, 14 -> 21 rows from 8 documents: 14.0% / 75.1% / -0.7% -> 8.2% / 35.5% / +1.1% held out (generic 23.8%); the
  newer qmv range refits to memory 0.906, 6.4 us per kernel, compute 0.641 (was 0.893, 6.6 us, 0.653); M4 Max decode
  37.1% generic -> 10.1%, but the M1 Max's two rows 54.4% -> 69.0% and the M2 Ultra's three 15.4% -> 20.8%. MLX
  prefill 13.1% -> 16.5% (an M2 Max prompt of a conversion its issue calls slow, Y010, reads +156%). Ollama decode,
  45 -> 54 rows: 21.2% / 80.5% / +16.7% -> 19.4% / 41.0% / +13.2%; Ollama 0.9.0 on an M4 Max decodes 19% faster than
  the Apple defaults predict (nine rows, one document), the opposite of its NVIDIA rows. vLLM: batch latency 25.6% ->
  18.5% (an H100's Llama 3.1 8B, BF16 and RTN weights on Marlin, 7.4%); decode 10.8% -> 11.3%, the Spark's
  Nemotron-3-Super NVFP4 decoding at 98% of its bandwidth ceiling (-21% to -25%); TTFT 17.6% over 25 rows.
- **llama.cpp on CPUs** (rows Z001-Z029, `extra/llama-cpp-cpu.md`: a Ryzen 9 7950X and Threadripper PRO 5975WX and
  5995WX, 2024 builds, five documents). With no CPU rows, a CPU's prompt ran at the generic CPU default, 0.9 of its
  int8 peak: 2.4-16x the measured rate (Q4_0/Q8_0 3-4x, k-quants 4-6x, IQ2/IQ3 10-16x), while decode, bandwidth-bound,
  was within 4-21%. The profile now fits amd-cpu prompt efficiencies per format (0.25 of the AVX-512 VNNI peak for
  Q4_0, 0.15 for Q4_K_S, 0.19 the k-quant family's mean for the formats no row informs). Held out, prefill on the
  7950X 399% -> 37.6% (20 rows, 4 documents), the 5975WX 161% -> 17.5%, the 5995WX 190% -> 6.5%; llama.cpp prefill
  over all 177 rows 19.7% (17.4% on the 153 GPU and SoC rows before). Intel and Arm CPUs have no llama.cpp rows: they
  keep the generic default (the error above) and `predict` says so ("nothing fitted for intel-cpu"). ggml-cpu has no
  GEMM ramp (`efficiency.cpu.gemm_half_tokens: 0`): it runs one dot product per weight row and token at any batch,
  where the generic CPU ramp (the micro-engine's PyTorch GEMMs, half rate at 64 tokens) had put a decode step of 9
  sequences at 8.3x one of 8 on a 5995WX (480 vs 58 ms for Llama 3.1 8B Q4_K_M; now 65 ms). Refitted without it
  (`fit_runtimes.py --write-only`, the amd-cpu block only), the 41 CPU rows held out alone read as before: prefill
  31.0% / 212.2% / +23.7% (30.9% / 197.0% / +23.7% with the ramp; every row a 512- or 2048-token prompt, where the
  ramp had cost 11%), decode 4.0%.
- **Sliding windows a runtime keeps whole** (`windows_ignored`, by model family and version). llama.cpp's `llama`
  and `phi3` architectures load no window (its `phi3` loader prints 'Phi SWA is currently disabled'), so under
  llama.cpp and Ollama Mistral-7B-v0.1 and Phi-3 cache and attend every token: 4 GiB of KV for Mistral-7B-v0.1 at
  32k tokens where vLLM holds its 4,096-token window (512 MiB), and 1.5 GiB for Phi-3-mini at 4k (768 MiB windowed).
  Every llama.cpp build before b5490 (PR #13194, May 2025) did so for Gemma 2/3 and gpt-oss too (Gemma 2 9B at 8k:
  2,688 MiB, 2,016 MiB windowed). mlx-lm likewise (its `llama.py` slides only the layers a config's `layer_types`
  names, and Mistral-7B-v0.1's names none; `phi3.py` reads no window). No training row changes (each one's context is
  within its model's window); held out, MLX's 33,898-token Mistral-7B prompt on an M2 Ultra (mlx-lm PR #40,
  `benchmarks/data/heldout/`) reads 863 tok/s against 869 measured, where the window had read 1,121 (+29%).
- **Single-request latency of the CUDA-graph runtimes** (rows T001-T030, `extra/trtllm-vllm-latency.md`). vLLM at one
  request in flight: 0.6.3 on an A100 (Qwen2.5 0.5B-72B) predicted -5% to +24%; V1 builds (2025-2026) on a GH200,
  RTX 4090 and RTX 5090 18-59% slow in TPOT, the 13.2 us generic launch cost against graphs replayed with little host
  work. The vLLM profile's `0.8.0` entry now `refits: {nvidia-gpu: [memory]}` (V1's execution loop and piecewise CUDA
  graphs), but no V1 value ships: its rows' documents disagree (tt-inference-server's A100 and H100 TPOT carry several
  ms a step beyond the weights' read, pegainfer's RTX 5090 about two), and held out both fitted policies read vLLM's
  decode rows worse than generic (25.0% against 11.6%). vLLM TPOT, 30 rows: 20.4% generic -> 14.6%.
  TensorRT-LLM's first batch-1 rows (GPT-J 6B, TRT-LLM 0.5 on an H100 and A100; DeepSeek-R1 on 8x B200, 2025) gave
  its NVIDIA bandwidth fraction a second document; the fit (0.84) no longer ships, see the bullet on max-load rows.
- **SGLang on an H20, collected and not merged** (`extra/sglang-lmdeploy-tgi.md`, S2). Every BF16 Qwen3 from 8B up
  decoded at 1.34-1.39 TB/s of weights, a third of the H20's 4.0 TB/s whatever its size; merged, those 18 rows set
  SGLang's bandwidth fraction on every NVIDIA GPU to 0.53 (an 8B BF16 decode on an H100 at 10.8 ms a token). They were
  taken out after that fit was seen, on that physical reason. SGLang's CPU backend on a Xeon 6980P (S011-S012; its
  dual-socket rows S001-S010 need a two-socket card): TTFT 86% short at the generic CPU default, TPOT 6% short. On
  NVIDIA GPUs it has four documents since J001-J018 (LMSYS's gpt-oss post on 4x B200 and 8x H100, DataCrunch's raw
  outputs on H200 and its DeepSeek-R1 guide); held out, its batch-1 decode reads 51% median and both ways:
  gpt-oss-120b 34-53% slow (the generic GPU decode pays 13.2 us a kernel where SGLang replays a CUDA graph, see the
  launch-cost bullet), DeepSeek-R1 on 8x H200 (SGLang of January 2025) 51% fast. No fitted value ships.
- **TGI** (rows S032-S043): TPOT on 8x MI300X 9.6% median at the priors; TTFT reads +54% on an A100 (a TGI PR's
  batch prefill of 100-350 prompts of 40 tokens) and -55% on the MI300X (405B at 80 tokens), one document each.
- **Rows not merged** (each file in `benchmarks/data/extra/` says why): GPUStack's burst rows (per-request serving costs
  inside the figure), first prompts after loading whose time grows with the file size (the mmap'd weights paging in),
  figures without their concurrency, and rows whose lengths are not stated.

"""


SELECTION = """## Which fit ships (model selection on leave-one-source-out error)

Each runtime is fitted under three policies: `versions` (one value per hardware scope, and per version range where
a profile's version entry says the kernels changed, `refits`; a range fits on its own rows only with at least 3
rows from 2 source documents, else it keeps the runtime-wide value), `runtime` (one value per hardware scope, every
version mixed) and `none` (the profile's documented priors, no fitted value). `kernels_from` runtimes (Ollama) are
judged with the kernels of the runtime they run, that runtime's policy fixed first. **The rule: for each runtime,
hardware scope (nvidia-gpu, amd-gpu, nvidia-soc, apple-soc, ...) and kind of fitted value (`memory`, judged on the
latency-bound decode rows and on the max-load throughput rows a bandwidth fit moves; `compute_by_format`, judged on
the prefill, TTFT and large-batch rows), the profile ships
the most specific policy under which no metric of that kind's rows on that scope has a leave-one-source-out median
|error| worse than generic's; if none qualifies, that scope's kind ships no fitted value (`none`).** (Judged per
runtime instead of per scope, one scope's miss dropped every scope's fit: vLLM's MI300X compute fit, 11% against 32%
generic on its max-load rows, fell with the Spark's prefill rows. Judged on every row of a metric name instead of the
kind's own rows, vLLM's Spark prompt fit, 37.3% -> 30.9% held out, fell with the Spark's batch-1 decode rows, which
large-batch decode rows had put under the compute kind's metrics. Judged beside a bandwidth fit that does not ship,
the same prompt fit read vLLM's own Spark TTFT rows, U013-U020, worse than generic, 15.7% against 15.1% (the fitted
Spark bandwidth sped their prompts up), and fell; with the Spark's bandwidth at its choice, none, those rows read
13.6% and the Spark's prompts 24.6% against 37.3%. So the bandwidth kind is chosen first, every kind under one policy, and the
compute kind is then judged with each scope's bandwidth at its choice, as the two ship together.) This is model selection on the leave-one-source-out error itself: the shipped column is the best of up
to three tries judged on the same held-out rows, so it is optimistic by the choice made (the unselected columns are
printed so the size of that choice shows), and the top table (the shipped mix, rerun) is the number to quote.
A fitted value whose rows all come from one document does not ship (`MIN_SHIPPED_SOURCES` = 2, counted per
parameter on each runtime, hardware scope and version range): held out, nothing is left to fit it on, so
leave-one-source-out never judged it. One vLLM-on-Spark decode row, N001, had set the Spark's bandwidth fraction to
1.0 and put the seeds' vLLM concurrency tables 31-118% high; counted per scope rather than per value, the rule still
shipped llama.cpp's AMD bandwidth fraction 0.37 from one document's three DeepSeek-V3 decode rows on 8 MI300X (L006-L008:
every AMD GPU then decoded at about a third of its bus, an RX 7900 XTX Llama-2-7B Q4_0 at 67 tok/s), its AMD Q5_K_M
prompt efficiency from one MI100 PR, its NVIDIA MXFP4 and Q8_0 prompt efficiencies from one row each (N040, C100), the
Q4_K_M efficiency of the 2024 cuBLAS range from one document, and vLLM's Spark BF16 and FP8 prompt efficiencies from
one document (djangodevreng). Those rows are still predicted above, by the values they fall back to when held out, so
the tables do not move with the rule; what ships for unseen rows does.
Leave-one-source-out median |error| per policy, all runtimes under one policy at a time:
"""
