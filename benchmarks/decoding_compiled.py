"""The decoding benchmark's compiled suite (benchmarks/decoding.py ``--suite compiled``): the cached
decoder step compiled ahead of time by PyTorch's compiler (AOTInductor: ``torch.export`` then
``torch._inductor.aoti_compile_and_package``, generated C++ with the weights frozen in), timed
against our eager fast path and CTranslate2 on the engines suite's models.

One step is one call from Python into the compiled package: the token embedding, every decoder
layer (self-attention over a fixed-size key/value cache of the bucket's length, cross-attention,
feed-forward, layer norms) and the output projection. The shapes are static: a package per
bucket of rows (sentences x beams), target length and source length, compiled once and cached on
disk under ``--compiled-cache`` by a key of the weights' SHA-256, the bucket, the PyTorch version
and the CPU capability (the same key a run directory's cache would use), so a second run loads
it in milliseconds. The step takes the caches and returns the step's keys and values; Python
writes them into the caches (the in-graph write of a whole cache would copy it every step).
The encoder stays our eager fast path (it runs once a search). Post-LN models only (the engines
suite's).

Not a decoding path of the package: measured slower than CTranslate2 in every row, so ``auto``
would never choose it while CTranslate2 is installed (docs/explanation/results.md, "The compiled
step").
"""

from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from decoding_common import BOS, EOS, build_models, random_sources, test_set_file
from transformer.decoding import FastDecoder, beam_search, greedy_decode
from transformer.decoding.fast_encoder import fast_encode


class CompiledStep(nn.Module):
    """One cached decoder step of a post-LN :class:`~transformer.Transformer`, written for export:
    ``(tokens (R,), position (), keys, values (L, R, H, T, Dh), cross keys, values (L, R, H, S,
    Dh), source mask (R, S) bool) -> (logits (R, V), the step's keys, values (L, R, H, Dh))``.
    Cache positions from ``position`` on are masked; the step's own key is attended separately."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        assert not model.config.norm_first, "post-LN models only"
        self.model = model

    def forward(self, tokens: Tensor, position: Tensor, keys: Tensor, values: Tensor,
                cross_keys: Tensor, cross_values: Tensor, source_mask: Tensor):
        m = self.model
        embed = m.tgt_embed
        x = F.embedding(tokens, embed.token.weight) * embed.token.scale  # (R, D)
        x = x + embed.position.table.index_select(0, position.view(1))
        r, d = x.shape
        h = m.config.num_heads
        dh = d // h
        t = keys.size(3)
        cached = torch.arange(t, device=x.device) < position  # (T,)
        scale = dh ** -0.5
        new_keys, new_values = [], []
        for i, layer in enumerate(m.decoder.layers):
            q, k, v = layer.self_attn.qkv_proj(x).view(r, 3, h, dh).unbind(1)  # (R, H, Dh) each
            old = torch.einsum("rhd,rhtd->rht", q, keys[i]).mul(scale).masked_fill(~cached, float("-inf"))
            weights = torch.cat([old, (q * k).sum(-1, keepdim=True) * scale], -1).softmax(-1)  # (R, H, T + 1)
            attended = torch.einsum("rht,rhtd->rhd", weights[..., :t], values[i]) + weights[..., t:] * v
            x = layer.norm1(x + layer.self_attn.out_proj(attended.reshape(r, d)))
            cq = layer.cross_attn.q_proj(x).view(r, h, dh)
            scores = torch.einsum("rhd,rhsd->rhs", cq, cross_keys[i]).mul(scale)
            scores = scores.masked_fill(~source_mask[:, None, :], float("-inf"))
            cross = torch.einsum("rhs,rhsd->rhd", scores.softmax(-1), cross_values[i])
            x = layer.norm2(x + layer.cross_attn.out_proj(cross.reshape(r, d)))
            ff = layer.feed_forward
            x = layer.norm3(x + ff.linear2(ff.activation(ff.linear1(x))))
            new_keys.append(k)
            new_values.append(v)
        return m.output_projection(x), torch.stack(new_keys), torch.stack(new_values)


def _key(model: nn.Module, bucket: tuple[int, int, int]) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    digest.update(f"{bucket} {torch.__version__} {torch.backends.cpu.get_cpu_capability()}".encode())
    return digest.hexdigest()[:24]


def compiled_step(model: nn.Module, *, rows: int, steps: int, src_len: int, cache: Path) -> dict:
    """The compiled step of ``model`` for the bucket (rows, steps, src_len), from ``cache`` or
    compiled into it: ``{"runner", "compile_s" (None when loaded), "load_s", "bytes", "path"}``."""
    path = cache / f"step-{_key(model, (rows, steps, src_len))}.pt2"
    config = model.config
    layers, heads = config.num_decoder_layers, config.num_heads
    dh = config.d_model // heads
    compile_s = None
    if not path.exists():
        example = (torch.zeros(rows, dtype=torch.long), torch.tensor(1),
                   torch.zeros(layers, rows, heads, steps, dh), torch.zeros(layers, rows, heads, steps, dh),
                   torch.zeros(layers, rows, heads, src_len, dh), torch.zeros(layers, rows, heads, src_len, dh),
                   torch.ones(rows, src_len, dtype=torch.bool))
        cache.mkdir(parents=True, exist_ok=True)
        began = time.perf_counter()
        with torch.no_grad():
            exported = torch.export.export(CompiledStep(model).eval(), example)
            tmp = path.with_suffix(".tmp.pt2")
            torch._inductor.aoti_compile_and_package(exported, package_path=str(tmp))
        tmp.rename(path)
        compile_s = time.perf_counter() - began
    began = time.perf_counter()
    runner = torch._inductor.aoti_load_package(str(path))
    return {"runner": runner, "compile_s": compile_s, "load_s": time.perf_counter() - began,
            "bytes": path.stat().st_size, "path": str(path)}


class CompiledDecoder:
    """What ``greedy_decode``/``beam_search`` take as ``decoder=``: sessions over a compiled
    step of fixed rows (``beams`` per sentence), steps and source length."""

    precision = "fp32"

    def __init__(self, model: nn.Module, runner, *, rows: int, beams: int, steps: int,
                 src_len: int) -> None:
        self.model, self.runner = model, runner
        self.rows, self.beams, self.steps, self.src_len = rows, beams, steps, src_len
        self.eager = FastDecoder(model)  # its packed encoder

    def start(self, src: Tensor) -> CompiledSession:
        """A session over ``src`` (N, S): N * beams and S within the bucket; fewer sentences are
        padded with copies of the first."""
        n = src.size(0)
        if n * self.beams > self.rows or src.size(1) > self.src_len:
            raise ValueError(f"{n} sentences of {src.size(1)} tokens exceed the bucket")
        src = torch.cat([src, src[:1].expand(self.rows // self.beams - n, -1)])
        self.eager.steps()
        encoder = self.eager._encoder
        memory = self.model.encode(src) if encoder is None else fast_encode(self.model, encoder, src)  # (N, S, D)
        return CompiledSession(self, src, memory, sentences=n)


class CompiledSession:
    """One search over the compiled step (the Session protocol of transformer.decoding.session).

    The step always runs the bucket's R rows: ``active`` says which of them the search's rows
    are (sentence i's beams start at row i * K; rows of finished sentences keep running, unread)."""

    needs_prefix = False

    def __init__(self, decoder: CompiledDecoder, src: Tensor, memory: Tensor, *, sentences: int) -> None:
        model, k = decoder.model, decoder.beams
        config = model.config
        pad = decoder.src_len - src.size(1)
        keys, values = [], []
        for layer in model.decoder.layers:
            ck, cv = layer.cross_attn.split_heads(layer.cross_attn.kv_proj(memory), 2)  # (N, H, S, Dh)
            keys.append(ck)
            values.append(cv)

        def rows_of(x: Tensor) -> Tensor:  # (L, N, H, S, Dh) -> (L, N*K, H, S', Dh)
            return F.pad(x, (0, 0, 0, pad)).repeat_interleave(k, 1)

        self.cross_keys, self.cross_values = rows_of(torch.stack(keys)), rows_of(torch.stack(values))
        self.source_mask = F.pad(src != config.pad_id, (0, pad)).repeat_interleave(k, 0)  # (N*K, S')
        rows, heads = src.size(0) * k, config.num_heads
        shape = (config.num_decoder_layers, rows, heads, decoder.steps, config.d_model // heads)
        self.keys, self.values = torch.zeros(shape), torch.zeros(shape)
        self.active = torch.arange(sentences) * k  # (R',): the bucket's row of each search row
        self.runner, self.rows, self.position = decoder.runner, rows, 0

    def step(self, tokens: Tensor) -> Tensor:
        ids = tokens.new_zeros(self.rows)
        ids[self.active] = tokens[:, 0]
        logits, k, v = self.runner(ids, torch.tensor(self.position), self.keys, self.values,
                                   self.cross_keys, self.cross_values, self.source_mask)
        self.keys[:, :, :, self.position] = k
        self.values[:, :, :, self.position] = v
        self.position += 1
        return logits[self.active]

    def select(self, index: Tensor, *, keep: Tensor | None, beams: int) -> None:
        taken = self.active[index]  # (R',)
        full = torch.cat([taken, taken[:1].expand(self.rows - taken.numel())])  # (R,)
        self.keys, self.values = self.keys.index_select(1, full), self.values.index_select(1, full)
        if keep is not None:  # sentences left: each row's memory moves with it
            self.cross_keys = self.cross_keys.index_select(1, full)
            self.cross_values = self.cross_values.index_select(1, full)
            self.source_mask = self.source_mask.index_select(0, full)
        self.active = torch.arange(taken.numel())


def compiled_suite(args: argparse.Namespace) -> dict:
    """Per shape, batch and search: the compiled step's compile (or load) time and package size,
    and tokens per second of the compiled step, ours eager and CTranslate2 float32, interleaved."""
    import tempfile

    from decoding_engines import ct2_translators, engine_runs

    rows = []
    vocabulary = ["<pad>", "<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(4, args.vocab)]
    for shape_name, shape in args.shapes.items():
        ours, _ = build_models(vocab=args.vocab, hf=False, **shape)
        translators = {k: v for k, v in ct2_translators(ours, vocabulary, Path(tempfile.mkdtemp())).items()
                       if k == "CT2 fp32"}
        for batch in args.batches:
            count = 1 if batch > 1 else args.single_sentences
            batches = [random_sources(batch=batch, src_len=args.src_len, vocab=args.vocab, seed=s)
                       for s in range(count)]
            for beam, method in ((1, "greedy"), (5, "beam 5")):
                step = compiled_step(ours, rows=batch * beam, steps=args.length, src_len=args.src_len,
                                     cache=args.compiled_cache)
                decoder = CompiledDecoder(ours, step["runner"], rows=batch * beam, beams=beam,
                                          steps=args.length, src_len=args.src_len)
                fns = engine_runs(ours, None, translators, {"fp32": FastDecoder(ours)}, batches,
                                  vocabulary, beam=beam, length=args.length)
                fns["compiled fp32"] = _compiled_run(ours, decoder, batches, beam=beam, length=args.length)
                same = _share_equal(fns["compiled fp32"](), fns["ours fp32"]())
                best: dict[str, float] = {}
                for _ in range(args.repeats):
                    for name, fn in fns.items():
                        began = time.perf_counter()
                        fn()
                        best[name] = min(best.get(name, float("inf")), time.perf_counter() - began)
                tokens = batch * count * args.length
                tps = {name: round(tokens / s, 1) for name, s in best.items()}
                row = {"shape": shape_name, "batch": batch, "method": method, "tokens_per_s": tps,
                       "compile_s": step["compile_s"], "load_s": round(step["load_s"], 3),
                       "package_mb": round(step["bytes"] / 2**20, 2), "same_as_eager": same,
                       "compiled/eager": round(tps["compiled fp32"] / tps["ours fp32"], 2),
                       "compiled/CT2 fp32": round(tps["compiled fp32"] / tps["CT2 fp32"], 2),
                       "eager/CT2 fp32": round(tps["ours fp32"] / tps["CT2 fp32"], 2)}
                rows.append(row)
                print_compiled_row(row, header=len(rows) == 1)
    return {"suite": "compiled", "length": args.length, "single_sentences": args.single_sentences,
            "torch": torch.__version__, "capability": torch.backends.cpu.get_cpu_capability(),
            "rows": rows}


def compiled_parity(args: argparse.Namespace) -> dict:
    """``--model RUN_DIR``: the run's translation of test_2016_flickr (``--input``: another file)
    by ``Translator`` in float32 greedy, once with its eager decoder and once with the compiled
    step in its place (one bucket: the translator's batch, the file's longest source and its
    largest length limit); the share of lines that are equal, and each pass's seconds."""
    from transformer.data.parallel import read_lines
    from transformer.inference import load_translator

    source = args.input or test_set_file(args.src)
    lines = list(read_lines(source))
    translator = load_translator(args.model, precision="fp32", engine="torch", beam_size=1)
    model, opt = translator.model, translator.options
    lengths = [len(translator.src_tokenizer.encode(line.strip())) for line in lines]
    steps = min(model.config.max_len, int(opt.max_len_a * max(lengths) + opt.max_len_b))
    step = compiled_step(model, rows=translator.batch_size, steps=steps, src_len=max(lengths),
                         cache=args.compiled_cache)
    texts, seconds = {}, {}
    for name, decoder in (("eager", translator.decoder),
                          ("compiled", CompiledDecoder(model, step["runner"], rows=translator.batch_size,
                                                       beams=1, steps=steps, src_len=max(lengths)))):
        translator.decoder = decoder
        began = time.perf_counter()
        texts[name] = [t.text for t in translator.translate(lines)]
        seconds[name] = round(time.perf_counter() - began, 2)
    equal = sum(a == b for a, b in zip(texts["eager"], texts["compiled"], strict=True))
    row = {"model": str(args.model), "source": str(source), "lines": len(lines), "equal_lines": equal,
           "bucket": {"rows": translator.batch_size, "steps": steps, "src_len": max(lengths)},
           "compile_s": step["compile_s"], "load_s": round(step["load_s"], 3), "seconds": seconds,
           "torch": torch.__version__, "capability": torch.backends.cpu.get_cpu_capability()}
    print(f"compiled float32 greedy equals eager on {equal}/{len(lines)} lines of {source.name} "
          f"(bucket {row['bucket']}; "
          + (f"compiled in {step['compile_s']:.0f} s; " if step["compile_s"] else "loaded from the cache; ")
          + f"eager {seconds['eager']} s, compiled {seconds['compiled']} s)")
    return {"suite": "compiled-parity", **row}


def _compiled_run(model, decoder: CompiledDecoder, batches: list[Tensor], *, beam: int, length: int):
    kw = dict(bos_id=BOS, eos_id=EOS, max_len=length, min_len=length, decoder=decoder)

    def run() -> list:
        out = []
        for src in batches:
            if beam == 1:
                out += greedy_decode(model, src, **kw)
            else:
                out += beam_search(model, src, beam_size=beam, **kw)
        return out

    return run


def _share_equal(a: list, b: list) -> float:
    return round(sum(x == y for x, y in zip(a, b, strict=True)) / len(a), 3)


def print_compiled_row(row: dict, *, header: bool) -> None:
    if header:
        print("tokens/s (1 thread); compile: seconds (- : loaded from the cache)")
        print(f"{'shape':24} {'batch':>5} {'method':7} {'compiled':>9} {'eager':>9} {'CT2 fp32':>9} "
              f"{'comp/eager':>10} {'comp/CT2':>9} {'eager/CT2':>9} {'compile':>8} {'MB':>6} {'same':>5}")
    tps = row["tokens_per_s"]
    compile_s = f"{row['compile_s']:8.0f}" if row["compile_s"] is not None else f"{'-':>8}"
    print(f"{row['shape']:24} {row['batch']:5d} {row['method']:7} {tps['compiled fp32']:9.0f} "
          f"{tps['ours fp32']:9.0f} {tps['CT2 fp32']:9.0f} {row['compiled/eager']:10.2f} "
          f"{row['compiled/CT2 fp32']:9.2f} {row['eager/CT2 fp32']:9.2f} {compile_s} "
          f"{row['package_mb']:6.1f} {row['same_as_eager']:5.2f}", flush=True)
