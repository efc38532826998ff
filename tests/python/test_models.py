"""kiln.models against Hugging Face transformers: a small Llama 3 built by
kiln, saved as a Hugging Face folder, loaded by both; logits, gradients,
greedy generation, and kiln.optim.AdamW against torch.optim.AdamW."""
import os

import numpy as np
import pytest
import torch

import kiln
from conftest import assert_close, to_kiln, to_torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local

SETTINGS = dict(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=128, ffn_dim=128)
V = SETTINGS["vocab_size"]
B, S = 2, 12


def randomize(model, seed):
    """Writes seeded random values into the model's parameters through
    NumPy (state_dict gives the parameters themselves): matrices normal(0,
    0.1), norm scales 1 + normal(0, 0.1), as tests/oracle/hf_models.py
    draws them, so the logits spread well beyond the init's."""
    rng = np.random.default_rng(seed)
    for name, t in model.state_dict().items():
        r = rng.standard_normal(t.shape)
        np.asarray(t)[...] = 1 + 0.1 * r if name.endswith("norm.weight") else 0.1 * r


@pytest.fixture(scope="module")
def model():
    m = kiln.models.build("llama3_debug", **SETTINGS)
    randomize(m, 0)
    return m


@pytest.fixture(scope="module")
def ids():
    return torch.from_numpy(np.random.default_rng(1).integers(0, V, (B, S)))


@pytest.fixture(scope="module")
def hf_dir(model, tmp_path_factory):
    d = tmp_path_factory.mktemp("llama") / "hf"
    model.save_hf(str(d))
    return d


@pytest.fixture(scope="module")
def hf_model(hf_dir):
    """The saved folder loaded by transformers in float64 (the reference:
    its rounding is far below kiln's f32 error); every weight must load."""
    import transformers  # here: importing it takes seconds
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    m, info = transformers.AutoModelForCausalLM.from_pretrained(
        hf_dir, dtype=torch.float64, output_loading_info=True, attn_implementation="eager")
    problems = {k: v for k, v in info.items() if v}
    assert not problems, f"transformers did not load kiln's folder cleanly: {problems}"
    return m.eval()


def test_build_and_forward_shape(model, ids):
    assert model.config["dim"] == 64 and model.config["n_layers"] == 2
    assert model.config["vocab_size"] == V and model.config["ffn_dim"] == 128
    logits = model(to_kiln(ids))
    assert logits.shape == (B, S, V) and logits.dtype == kiln.float32
    assert model(to_kiln(ids.to(torch.int32))).shape == (B, S, V)
    sd = model.state_dict()
    assert model.num_parameters == sum(t.numel() for t in sd.values())
    assert sorted(n for n, _ in model.named_parameters()) == sorted(sd)


def test_state_dict_holds_the_parameters(ids):
    m = kiln.models.build("llama3_debug", **SETTINGS)
    sd = m.state_dict()
    assert all(isinstance(t, kiln.Tensor) for t in sd.values())
    before = to_torch(m(to_kiln(ids)))
    w = sd["model.norm.weight"]
    w.fill_(2.0)  # the final norm's scale: the logits double
    after = to_torch(m(to_kiln(ids)))
    assert_close(after, 2 * before, 1e-5, 1e-6, "logits with the norm scale doubled")
    assert m.state_dict()["model.norm.weight"].tolist() == [2.0] * 64
    # And through load_state_dict, with new tensors.
    m.load_state_dict({**m.state_dict(), "model.norm.weight": kiln.ones([64])})
    assert_close(to_torch(m(to_kiln(ids))), before, 1e-6, 1e-7, "logits restored")


def test_save_hf_then_from_hf_is_identical(model, hf_dir, ids):
    loaded = kiln.models.from_hf(hf_dir)
    assert loaded.config["dim"] == 64 and loaded.config["n_kv_heads"] == 2
    for name, t in model.state_dict().items():
        assert np.array_equal(np.asarray(loaded.state_dict()[name]), np.asarray(t)), name
    a, b = np.asarray(model(to_kiln(ids))), np.asarray(loaded(to_kiln(ids)))
    assert a.tobytes() == b.tobytes()
    with pytest.raises(kiln.Error):
        model.save_hf(str(hf_dir))  # exists, and overwrite is off


def test_logits_match_transformers(model, hf_model, ids):
    with torch.no_grad():
        want = hf_model(input_ids=ids).logits
    got = to_torch(model(to_kiln(ids)))
    assert want.abs().max() > 1.0, "the logits should spread for the test to mean something"
    diff = (got.double() - want).abs().max().item()
    assert diff < 1e-4, f"max |kiln - transformers| = {diff:.3e}"


def shifted_targets(ids):
    """The next token at each position; -100 (ignored) at the end."""
    t = torch.full_like(ids, -100)
    t[:, :-1] = ids[:, 1:]
    return t


def test_gradients_match_transformers(model, hf_model, ids):
    targets = shifted_targets(ids)
    hf_model.zero_grad()
    out = hf_model(input_ids=ids, labels=ids)  # transformers shifts the labels itself
    out.loss.backward()
    want = {n: p.grad for n, p in hf_model.named_parameters()}

    k_ids, k_targets = to_kiln(ids), to_kiln(targets)

    def loss_fn(params):
        logits = model(k_ids, params=params)
        return kiln.ops.cross_entropy(logits.reshape(B * S, V), k_targets.reshape(B * S))

    params = model.state_dict()
    loss, (grads,) = kiln.value_and_grad(loss_fn)(params)
    assert abs(float(loss) - out.loss.item()) < 1e-5
    assert set(grads) == set(want)
    for name, g in grads.items():
        assert g.shape == params[name].shape
        assert_close(to_torch(g), want[name], 1e-4, 1e-5, f"grad {name}")
    # The model's own training loss takes the unshifted next tokens.
    assert abs(float(model.loss(k_ids, k_targets)) - out.loss.item()) < 1e-5


def test_generate_greedy_is_argmax_decoding(model):
    prompts = [[5, 17, 99, 3], [42, 1]]
    out = kiln.generate(model, prompts, max_new_tokens=6, temperature=0.0)
    assert len(out) == 2
    for prompt, o in zip(prompts, out):
        assert o["finish_reason"] == "length" and len(o["ids"]) == 6
        seq = list(prompt)
        for step in range(6):
            logits = to_torch(model(kiln.tensor([seq])))[0, -1].double()
            token = int(logits.argmax())
            assert o["ids"][step] == token, f"step {step}: {o['ids']} vs argmax {token}"
            lp = torch.log_softmax(logits, -1)[token].item()
            assert abs(o["logprobs"][step] - lp) < 1e-4
            seq.append(token)
    single = kiln.generate(model, prompts[0], max_new_tokens=6, temperature=0.0)
    assert single["ids"] == out[0]["ids"]
    stop = out[0]["ids"][2]
    eos = kiln.generate(model, prompts[0], max_new_tokens=6, temperature=0.0, eos_ids=[stop])
    assert eos["finish_reason"] == "eos" and eos["ids"] == out[0]["ids"][:2]


def torch_adamw(named, lr=1e-3):
    """torch.optim.AdamW with kiln's parameter groups: no weight decay for
    1-d parameters (norms) and the token embedding."""
    decay = [p for n, p in named if p.ndim >= 2 and not n.endswith("embed_tokens.weight")]
    rest = [p for n, p in named if not (p.ndim >= 2 and not n.endswith("embed_tokens.weight"))]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": rest, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)


@pytest.mark.parametrize("steps", [1, 3])
def test_adamw_matches_torch(model, ids, steps):
    k_ids, k_targets = to_kiln(ids), to_kiln(shifted_targets(ids))
    vg = kiln.value_and_grad(lambda p: model.loss(k_ids, k_targets, params=p))
    params = {n: t.contiguous() * 1.0 for n, t in model.state_dict().items()}  # copies
    opt = kiln.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    t_params = {n: torch.nn.Parameter(to_torch(t)) for n, t in params.items()}
    t_opt = torch_adamw(list(t_params.items()))
    for step in range(steps):
        _, (grads,) = vg(params)  # the same gradients go to both optimizers
        for n, p in t_params.items():
            p.grad = to_torch(grads[n])
        params = opt.step(params, grads)
        t_opt.step()
        assert opt.steps == step + 1
        for n, p in t_params.items():
            assert_close(to_torch(params[n]), p.detach(), 1e-5, 1e-7, f"step {step + 1}: {n}")
    moved = {n: (to_torch(params[n]) - to_torch(t)).abs().max().item()
             for n, t in model.state_dict().items()}
    assert min(moved.values()) > 1e-4, "every parameter should have moved"
