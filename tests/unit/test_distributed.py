"""Two processes launched by torchrun (gloo, CPU) train exactly what one process trains.

Each test starts `python -m torch.distributed.run --standalone` (a free port on this machine) and the
same program without it, then compares what they wrote. Every launch has a timeout, and the process
group of a launch that overruns it is killed, so a hang fails the test instead of stalling the suite.
"""

import datetime
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from transformer_course import checkpoint, data, datasets, distributed

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]

# A tiny translator trained by tc.fit, the same program with and without torchrun. Its batches hold 12,
# 7 and 1 rows of 4 to 8 targets: the processes' shares hold different numbers of targets, and the last
# batch leaves rank 1 with no row at all. argv: output folder, accumulate, the rank that fails (or -1).
WORKER = textwrap.dedent(
    """
    import sys

    import torch

    import transformer_course as tc
    from transformer_course import datasets, distributed

    out, accumulate, fail_rank = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    process = distributed.setup("cpu")
    try:
        corpus = tc.ParallelCorpus(datasets.make_dataset(0).train_pairs[:40])
        batches = [corpus.batch(range(0, 12)), corpus.batch(range(12, 19)), corpus.batch([19])]
        tc.set_seed(0)
        model = tc.Transformer(len(corpus.src_vocab), len(corpus.tgt_vocab), d_model=16, n_heads=2, n_layers=1,
                               d_ff=32, dropout=0.0, max_len=16)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        smoothed = tc.LabelSmoothingLoss(len(corpus.tgt_vocab), 0.1, corpus.tgt_vocab.pad_id)
        calls = {"loss": 0, "evaluate": 0}

        def loss_fn(logits, target):
            calls["loss"] += 1
            if process.rank == fail_rank and calls["loss"] == 3:
                raise ValueError(f"rank {process.rank} fails on purpose")
            return smoothed(logits, target)

        loss_fn.ignore_index = smoothed.ignore_index

        def evaluate():
            calls["evaluate"] += 1
            return 100.0 + process.rank  # a rank other than 0 would report a different score

        history = tc.fit(model, batches, 7, optimizer, loss_fn, evaluate=evaluate, eval_every=3, progress=False,
                         accumulate=accumulate)
        torch.save({"state": model.state_dict(), "losses": history.losses, "evals": history.evals,
                    "calls": calls, "world_size": process.world_size}, f"{out}/rank{process.rank}.pt")
    finally:
        distributed.cleanup()
    """
)


def run(args, cwd, timeout=180):
    """Run `args` in `cwd` with one thread per process; kill its whole process group after `timeout` s."""
    # On the CPU whatever the machine has (gloo and the CPU's arithmetic), so that the same runs are tested on
    # every reader's hardware.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONIOENCODING": "utf-8", "CUDA_VISIBLE_DEVICES": ""}
    for name in ("RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    proc = subprocess.Popen(
        args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"{' '.join(map(str, args))} hung for {timeout} s:\n{stderr[-3000:]}")
    return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    path = tmp_path_factory.mktemp("ddp") / "worker.py"
    path.write_text(WORKER)
    return path


def test_two_processes_train_what_one_process_trains(worker, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    single = run([sys.executable, worker, one, "1", "-1"], tmp_path)
    assert single.returncode == 0, single.stderr
    # Two processes, each computing its share in 2 micro-batches: the same global batches.
    pair = run([*TORCHRUN, worker, two, "2", "-1"], tmp_path)
    assert pair.returncode == 0, pair.stderr
    alone = torch.load(one / "rank0.pt")
    rank0, rank1 = torch.load(two / "rank0.pt"), torch.load(two / "rank1.pt")
    assert (alone["world_size"], rank0["world_size"]) == (1, 2)
    for key, weight in alone["state"].items():
        torch.testing.assert_close(rank0["state"][key], weight, atol=1e-5, rtol=0, msg=key)
        assert torch.equal(rank1["state"][key], rank0["state"][key])  # DDP keeps the replicas identical
    assert rank0["losses"] == pytest.approx(alone["losses"], abs=1e-5)
    assert rank1["losses"] == rank0["losses"]  # every process logs the global batch's loss
    assert alone["losses"][-1] < alone["losses"][0]
    # Only rank 0 evaluates; every process gets its score, at steps 3, 6 and the last one, 7.
    assert rank0["evals"] == rank1["evals"] == alone["evals"] == [(3, 100.0), (6, 100.0), (7, 100.0)]
    assert (rank0["calls"]["evaluate"], rank1["calls"]["evaluate"]) == (3, 0)
    # Each process split its share of the 12- and 7-row batches in 2 micro-batches, and ran 1 for the
    # one-row batch (rank 1: a copy of row 0, weighted 0): 2 + 2 + 1, twice, then 2 for step 7.
    assert rank0["calls"]["loss"] == rank1["calls"]["loss"] == 12


def test_a_failing_rank_ends_every_rank(worker, tmp_path):
    proc = run([*TORCHRUN, worker, tmp_path, "1", "1"], tmp_path, timeout=120)
    assert proc.returncode != 0
    assert "rank 1 fails on purpose" in proc.stdout + proc.stderr
    assert not list(tmp_path.glob("rank*.pt"))  # rank 0 did not go on training alone


def test_translate_train_under_torchrun_matches_one_process(tmp_path):
    args = ["-m", "transformer_course.translate", "train", "--dropout", "0", "--steps", "20"]
    two = run([*TORCHRUN, *args, "--checkpoint", "a.pt"], tmp_path)
    assert two.returncode == 0, two.stderr
    one = run([sys.executable, *args, "--checkpoint", "b.pt", "--quiet"], tmp_path)
    assert one.returncode == 0, one.stderr
    # Rank 0 alone reports, shows the progress bar and writes the checkpoint.
    assert two.stdout.count("trained 175,808 parameters for 20 steps") == 1
    assert " s on cpu (2 processes)" in two.stdout
    assert two.stderr.count("training:   0%") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pt", "b.pt"]
    a, b = checkpoint.load_checkpoint(tmp_path / "a.pt"), checkpoint.load_checkpoint(tmp_path / "b.pt")
    assert (a.extra["processes"], b.extra["processes"]) == (2, 1)
    weights_a, weights_b = a.model.state_dict(), b.model.state_dict()
    gaps = {key: (weights_a[key] - weights_b[key]).abs().max().item() for key in weights_b}
    # The key projections' biases are the exception: a constant added to every score of a query does not
    # change its softmax, so their gradient is zero but for rounding noise, which Adam turns into steps of
    # the learning rate's size (in one process too, whenever the sums are taken in another order).
    key_biases = {key for key in gaps if key.endswith("w_k.bias")}
    assert len(key_biases) == 6
    assert max(gap for key, gap in gaps.items() if key not in key_biases) < 1e-4
    # ... and the two models compute the same outputs.
    test = data.make_batch(datasets.make_dataset(0).test_pairs, b.src_vocab, b.tgt_vocab)
    with torch.no_grad():
        torch.testing.assert_close(a.model(test.src, test.tgt_in), b.model(test.src, test.tgt_in), atol=1e-4, rtol=0)


def test_translate_train_under_torchrun_fails_cleanly_on_every_rank(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    proc = run([*TORCHRUN, "-m", "transformer_course.translate", "train", "--checkpoint", "file/model.pt"], tmp_path)
    assert proc.returncode != 0
    # Every rank checks before training; torchrun stops the others once one has failed, so the slower rank
    # may be stopped before it writes the same line: once or twice, and never after training began.
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert 1 <= len(errors) <= 2 and len(set(errors)) == 1 and "is a file, not a folder" in errors[0], proc.stderr
    assert "training:" not in proc.stderr


# Each rank draws its own dropout masks: a model whose output is a dropout mask of its rows, trained by tc.fit.
DROPOUT_WORKER = textwrap.dedent(
    """
    import sys

    import torch
    import torch.nn.functional as F
    from torch import nn

    import transformer_course as tc
    from transformer_course import distributed


    class Masks(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(()))
            self.seen = []

        def forward(self, src, tgt_in):
            mask = F.dropout(torch.ones(len(src), 64), 0.5, self.training)  # (B, 64)
            self.seen.append(mask)
            return (self.scale * mask)[:, None, :].expand(-1, tgt_in.shape[1], -1)  # (B, T, 64)


    def loss_fn(logits, target):
        return logits.mean()


    loss_fn.ignore_index = None
    process = distributed.setup("cpu")
    try:
        tc.set_seed(0)  # the same seed in every process
        model = Masks()
        rows = torch.ones(8, 3, dtype=torch.long)
        tc.fit(model, [tc.Batch(rows, rows, rows)], 3, torch.optim.SGD(model.parameters(), lr=0.1), loss_fn,
               clip_grad=None, progress=False)
        torch.save(model.seen, f"{sys.argv[1]}/rank{process.rank}.pt")
    finally:
        distributed.cleanup()
    """
)


def test_each_rank_draws_its_own_dropout_masks(tmp_path):
    worker = tmp_path / "masks.py"
    worker.write_text(DROPOUT_WORKER)
    proc = run([*TORCHRUN, worker, tmp_path], tmp_path)
    assert proc.returncode == 0, proc.stderr
    rank0, rank1 = torch.load(tmp_path / "rank0.pt"), torch.load(tmp_path / "rank1.pt")
    assert len(rank0) == len(rank1) == 3 and rank0[0].shape == (4, 64)  # 3 steps, 4 of the 8 rows each
    for step in range(3):
        assert not torch.equal(rank0[step], rank1[step])  # row k of rank 0 and of rank 1: different masks
    assert not torch.equal(rank0[0], rank0[1])  # and new masks at every step


# setup() on a machine with GPUs, mocked: this machine may have none.
@pytest.fixture
def rank_1_of_2(monkeypatch):
    """torchrun's variables for rank 1 of 2 (local rank 1), a process group that 'exists', and recorders."""
    for name, value in {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)  # setup() then counts WORLD_SIZE's processes here
    calls = {"set_device": [], "init": []}
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls["set_device"].append(device))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)  # a GPU for each of the two processes
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: bool(calls["init"]))
    monkeypatch.setattr(
        torch.distributed, "init_process_group", lambda backend, timeout=None: calls["init"].append((backend, timeout))
    )
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 1)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda: 2)
    return calls


@pytest.mark.parametrize("device", [None, "cuda", torch.device("cuda")])
def test_setup_puts_each_rank_on_the_gpu_of_its_local_rank(rank_1_of_2, device):
    process = distributed.setup(device)
    assert process.device == torch.device("cuda", 1)  # not GPU 0, which rank 0 already uses
    assert rank_1_of_2["set_device"] == [torch.device("cuda", 1)]
    assert rank_1_of_2["init"] == [("nccl", None)]
    assert (process.rank, process.world_size) == (1, 2)


def test_setup_keeps_an_explicit_gpu_and_passes_the_timeout(rank_1_of_2):
    process = distributed.setup("cuda:0", timeout=datetime.timedelta(minutes=30))
    assert process.device == torch.device("cuda", 0)
    assert rank_1_of_2["init"] == [("nccl", datetime.timedelta(minutes=30))]
    with pytest.raises(TypeError, match=r"timeout must be a datetime\.timedelta"):
        distributed.setup("cpu", timeout=1800)


def test_setup_puts_every_rank_on_the_cpu_when_the_gpus_are_too_few(rank_1_of_2, monkeypatch):
    # Two processes on a one-GPU machine: NCCL refuses two ranks on one GPU, so both ranks take the CPU alike.
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    process = distributed.setup()
    assert process.device == torch.device("cpu")
    assert rank_1_of_2["init"] == [("gloo", None)] and rank_1_of_2["set_device"] == []
    with pytest.raises(ValueError, match=r"^device='cuda:1', but this machine has 1 GPU \(cuda:0\): start at most 1 "):
        distributed.setup("cuda")


def test_setup_refuses_a_gpu_index_the_machine_lacks(monkeypatch):
    # One process asking for GPU 3 of a two-GPU machine: the index is wrong, not the number of processes.
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    message = r"^device='cuda:3', but this machine has 2 GPUs \(cuda:0 to cuda:1\): use cuda:0 to cuda:1, or run on"
    with pytest.raises(ValueError, match=message):
        distributed.setup("cuda:3")


def test_setup_counts_the_processes_of_this_machine_not_of_the_run(rank_1_of_2, monkeypatch):
    # Two machines of one GPU each, one process on each: every process gets this machine's GPU 0.
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert distributed.setup().device == torch.device("cuda", 0)
    assert rank_1_of_2["init"] == [("nccl", None)]


def test_setup_refuses_a_gpu_on_a_machine_without_one(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert distributed.setup().device == torch.device("cpu")
    with pytest.raises(ValueError, match=r"^device='cuda:0', but this machine has no CUDA GPU: run on the CPU$"):
        distributed.setup("cuda")


# The timing command line, `python -m transformer_course.distributed` (its code: transformer_course/cli/distributed.py).
def test_timing_command_in_one_process(tmp_path):
    proc = run(
        [sys.executable, "-m", "transformer_course.distributed", "--steps", "2", "--warmup-steps", "1"], tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert line.startswith("1 process on cpu, fp32: ") and "ms per step of 64 sentence pairs (2 steps)" in line, line
    assert float(line.rsplit(" ", 1)[1]) > 0  # the loss after 3 steps
    assert not list(tmp_path.iterdir())  # it writes nothing


@pytest.mark.parametrize(
    ("args", "env", "fragment", "code"),
    [
        (["--steps", "0"], {}, "--steps=0 must be a positive integer", 2),
        (["--warmup-steps", "-1"], {}, "--warmup-steps=-1 must be a positive integer", 2),
        (["--precision", "fp8"], {}, "invalid choice: 'fp8'", 2),
        ([], {"WORLD_SIZE": "2"}, "torchrun sets LOCAL_RANK to an integer, found None", 1),
        (["--device", "cuda"], {"CUDA_VISIBLE_DEVICES": ""}, "error: device='cuda:0', but this machine has no CUDA", 1),
        (["--device", "tpu"], {}, "invalid choice: 'tpu'", 2),
    ],
)
def test_timing_command_errors_are_one_line(tmp_path, args, env, fragment, code):
    base = [sys.executable, "-m", "transformer_course.distributed", *args]
    proc = subprocess.run(
        base, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1", **env}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and fragment in proc.stderr, proc.stderr
