#!/usr/bin/env python3
"""Export small transformer and vision models to ONNX with dynamic axes, plus test data.

Kiln's C++ tests read what this script writes; they need neither PyTorch nor this script.

Requirements (only to re-export; the C++ tests need none of them):
  * Debian's python3-torch (1.13) and python3-torchvision (0.14),
  * a virtual environment with the system site packages and, from the Python package index,
    transformers==4.30.*, onnx==1.16.* and numpy<2 (numpy 1.24 is Debian's); onnxruntime==1.18.*
    is optional: when it imports, every exported model is checked against the PyTorch outputs.
      python3 -m venv --system-site-packages VENV
      VENV/bin/pip install 'transformers==4.30.*' 'onnx==1.16.*' 'onnxruntime==1.18.*' 'numpy<2'
No pretrained weights are downloaded: every model is built from a config with random weights
under a fixed seed (torch.manual_seed), and its inputs come from fixed-seed numpy generators; a
re-export on the same machine and packages gives byte-identical files. The small text models use
initializer_range=0.1 (not 0.02) so that attention is not near-uniform; torchvision's
zero-initialised ViT head gets random weights, and the ResNet's BatchNorms random statistics
(fresh ones are the identity in eval mode).

Commands:
  VENV/bin/python tests/onnx/dynamic/export_dynamic.py [--out DIR]
      the small models (default DIR: tests/onnx/dynamic/models/ beside this script; 5.3 MB);
  VENV/bin/python tests/onnx/dynamic/export_dynamic.py --full OUT_DIR
      the full-size models to try by hand (ViT-B/16, BERT-base, DistilBERT, GPT-2, ResNet-10;
      about 1.7 GB, 3 minutes on 2 cores; not committed);
  VENV/bin/python tests/onnx/dynamic/export_dynamic.py --check DIR
      re-run every model under DIR with onnxruntime against its test data sets;
  VENV/bin/python tests/onnx/dynamic/export_dynamic.py --describe MODEL.onnx
      print the model's op types and its shape-computing subgraphs (needs only onnx).

What it writes, one folder per model in the layout of ONNX's backend tests:
  <name>/model.onnx                            opset 17, dynamic batch (and sequence) axes
  <name>/test_data_set_<k>/input_<i>.pb         onnx TensorProto, named as graph input i
  <name>/test_data_set_<k>/output_<j>.pb        PyTorch's output j, named as graph output j
Small models (eval mode, do_constant_folding=True; random weights, see build_* below):
  bert_tiny         BertModel 2 layers, hidden 64, 4 heads, intermediate 128, vocab 1000;
                    inputs input_ids, attention_mask, token_type_ids [batch, sequence] int64;
                    outputs last_hidden_state [batch, sequence, 64], pooler_output [batch, 64]
  distilbert_tiny   DistilBertModel 2 layers, dim 64, 4 heads, hidden_dim 128, vocab 1000;
                    inputs input_ids, attention_mask; output last_hidden_state
  gpt2_tiny         GPT2LMHeadModel 2 layers, n_embd 64, 4 heads, n_positions 128, vocab 1000,
                    use_cache=False; inputs input_ids, attention_mask; output logits
  gpt2_tiny_past    the same weights with use_cache=True: inputs input_ids [batch, sequence],
                    attention_mask [batch, total], past_key_values.<l>.key/value
                    [batch, 4, past, 16]; outputs logits [batch, sequence, 1000] and
                    present.<l>.key/value [batch, 4, total, 16] (total = past + sequence)
  vit_tiny          torchvision VisionTransformer, image 32, patch 8, 2 layers, 4 heads,
                    hidden 64, mlp 128, 10 classes; input images [batch, 3, 32, 32]
  resnet_tiny       torchvision's ResNet code with BasicBlock, layers [1, 1, 1, 1] and widths
                    8, 16, 32, 64 instead of 64..512 (ResNet-10's 4.9M weights would be 20 MB;
                    --full writes that one); input images [batch, 3, 32, 32], 10 classes
Data sets: text models at (batch, sequence) = (1, 1), (1, 16), (2, 32), (1, 7), (3, 5); where
batch > 1 the last row's attention_mask ends with zeros (right padding). gpt2_tiny_past at
(batch, past, sequence) = (1, 1, 1), (1, 5, 1), (2, 16, 1), (1, 8, 4), (1, 31, 1), its past
values random. Vision models at batch 1, 2, 3. The export's dummy inputs use other sizes, so a
size baked into the graph shows up as a failing data set.

gpt2_tiny_past/decode/ holds a greedy decode of 64 tokens from a fixed 4-token prompt, run by
PyTorch with the cache model: decode/step_<n>/input_<i>.pb and output_0.pb (logits). Step 0 is
the prompt with an empty past (past length 0): all its inputs are written, past tensors of shape
[1, 4, 0, 16] included. Step n > 0 has only input_ids [1, 1] (the token that step n-1 chose) and
attention_mask [1, 4 + n]; its past_key_values.* are step n-1's present.* outputs. Logits are
[1, sequence, 1000]; the chosen token is the argmax of the last position.
gpt2_tiny_past/decode_reference.txt lists, per step, the input token, the argmax and the margin
between the two largest logits (a small margin means another engine may pick another token: a
test should feed the reference tokens, teacher-forced, and compare logits with a tolerance).
"""

import argparse
import os
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

OPSET = 17
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "models")

TEXT_SHAPES = [(1, 1), (1, 16), (2, 32), (1, 7), (3, 5)]  # (batch, sequence)
TEXT_DUMMY = (2, 9)  # the export's trace inputs: not a data set's shape
PAST_SHAPES = [(1, 1, 1), (1, 5, 1), (2, 16, 1), (1, 8, 4), (1, 31, 1)]  # (batch, past, seq)
PAST_DUMMY = (3, 6, 2)
VISION_BATCHES = [1, 2, 3]
VISION_DUMMY = 4
FULL_TEXT_SHAPES = [(1, 1), (1, 16), (2, 32), (1, 128)]
FULL_VISION_BATCHES = [1, 2]
DECODE_PROMPT = [17, 423, 98, 751]
DECODE_STEPS = 64


# ----------------------------------------------------------------------------------------
# Writing test data


def write_tensor(path, array, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array), name).SerializeToString())


def read_tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def graph_io_names(model_path):
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    inputs = [i.name for i in m.graph.input if i.name not in inits]
    outputs = [o.name for o in m.graph.output]
    return inputs, outputs


def write_data_set(folder, input_names, output_names, feeds, outputs):
    """feeds: name -> array for every graph input; outputs: arrays in graph output order."""
    os.makedirs(folder, exist_ok=True)
    for i, name in enumerate(input_names):
        write_tensor(os.path.join(folder, "input_%d.pb" % i), feeds[name], name)
    assert len(outputs) == len(output_names), (len(outputs), output_names)
    for j, (name, value) in enumerate(zip(output_names, outputs)):
        write_tensor(os.path.join(folder, "output_%d.pb" % j), value, name)


# ----------------------------------------------------------------------------------------
# Models (torch and transformers are imported here only, so --describe needs neither)


def _torch():
    import torch

    return torch


def text_wrapper(model, input_names):
    torch = _torch()

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            out = self.model(**dict(zip(input_names, args)), return_dict=False)
            return tuple(out)

    return Wrapper().eval()


def build_bert(full=False):
    torch = _torch()
    from transformers import BertConfig, BertModel

    torch.manual_seed(1)
    if full:
        cfg = BertConfig()
    else:
        cfg = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                         num_attention_heads=4, intermediate_size=128,
                         max_position_embeddings=128, initializer_range=0.1)
    return BertModel(cfg).eval(), cfg.vocab_size


def build_distilbert(full=False):
    torch = _torch()
    from transformers import DistilBertConfig, DistilBertModel

    torch.manual_seed(2)
    if full:
        cfg = DistilBertConfig()
    else:
        cfg = DistilBertConfig(vocab_size=1000, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                               max_position_embeddings=128, initializer_range=0.1)
    return DistilBertModel(cfg).eval(), cfg.vocab_size


def build_gpt2(full=False, use_cache=False):
    torch = _torch()
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(3)
    if full:
        cfg = GPT2Config(use_cache=use_cache)
    else:
        cfg = GPT2Config(vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=128,
                         bos_token_id=0, eos_token_id=0, initializer_range=0.1,
                         use_cache=use_cache)
    return GPT2LMHeadModel(cfg).eval(), cfg


def gpt2_past_wrapper(model, n_layer):
    torch = _torch()

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, *past):
            pkv = tuple((past[2 * i], past[2 * i + 1]) for i in range(n_layer))
            logits, presents = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                          past_key_values=pkv, use_cache=True,
                                          return_dict=False)
            flat = []
            for k, v in presents:
                flat += [k, v]
            return (logits, *flat)

    return Wrapper().eval()


def build_vit(full=False):
    torch = _torch()
    from torchvision.models.vision_transformer import VisionTransformer, vit_b_16

    torch.manual_seed(4)
    if full:
        model = vit_b_16(weights=None)
    else:
        model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                                  hidden_dim=64, mlp_dim=128, num_classes=10)
    # torchvision zero-initialises the classification head: its output would be all zeros.
    torch.nn.init.normal_(model.heads.head.weight, std=0.05 if full else 0.2)
    torch.nn.init.normal_(model.heads.head.bias, std=0.05)
    return model.eval()


def _randomise_batchnorm(model):
    """Fresh BatchNorms are the identity in eval mode; give them statistics and an affine."""
    torch = _torch()
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.3, 0.3)


def build_resnet(full=False):
    torch = _torch()
    from torchvision.models.resnet import BasicBlock, ResNet

    torch.manual_seed(5)
    if full:
        model = ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10)
    else:
        class NarrowResNet(ResNet):
            """torchvision's ResNet (its _make_layer, BasicBlock and forward) with narrow widths."""

            def __init__(self, widths=(8, 16, 32, 64), num_classes=10):
                torch.nn.Module.__init__(self)
                nn = torch.nn
                self._norm_layer = nn.BatchNorm2d
                self.inplanes = widths[0]
                self.dilation = 1
                self.groups = 1
                self.base_width = 64
                self.conv1 = nn.Conv2d(3, widths[0], kernel_size=7, stride=2, padding=3,
                                       bias=False)
                self.bn1 = nn.BatchNorm2d(widths[0])
                self.relu = nn.ReLU(inplace=True)
                self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
                self.layer1 = self._make_layer(BasicBlock, widths[0], 1)
                self.layer2 = self._make_layer(BasicBlock, widths[1], 1, stride=2)
                self.layer3 = self._make_layer(BasicBlock, widths[2], 1, stride=2)
                self.layer4 = self._make_layer(BasicBlock, widths[3], 1, stride=2)
                self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
                self.fc = nn.Linear(widths[3] * BasicBlock.expansion, num_classes)
                for m in self.modules():
                    if isinstance(m, nn.Conv2d):
                        nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

        model = NarrowResNet()
    _randomise_batchnorm(model)
    return model.eval()


# ----------------------------------------------------------------------------------------
# Inputs


def text_inputs(names, batch, seq, vocab, seed):
    rng = np.random.RandomState(seed)
    feeds = {}
    ids = rng.randint(0, vocab, size=(batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), np.int64)
    if batch > 1 and seq > 1:
        mask[-1, seq - max(1, seq // 4):] = 0  # right padding in the last row
    for n in names:
        if n == "input_ids":
            feeds[n] = ids
        elif n == "attention_mask":
            feeds[n] = mask
        elif n == "token_type_ids":
            tt = np.zeros((batch, seq), np.int64)
            tt[:, seq // 2:] = 1
            feeds[n] = tt
        else:
            raise ValueError(n)
    return feeds


def past_names(n_layer):
    ins, outs = [], []
    for i in range(n_layer):
        ins += ["past_key_values.%d.key" % i, "past_key_values.%d.value" % i]
        outs += ["present.%d.key" % i, "present.%d.value" % i]
    return ins, outs


def past_inputs(cfg, batch, past, seq, seed):
    rng = np.random.RandomState(seed)
    head_dim = cfg.n_embd // cfg.n_head
    feeds = {
        "input_ids": rng.randint(0, cfg.vocab_size, size=(batch, seq)).astype(np.int64),
        "attention_mask": np.ones((batch, past + seq), np.int64),
    }
    for n in past_names(cfg.n_layer)[0]:
        feeds[n] = rng.normal(0, 1, size=(batch, cfg.n_head, past, head_dim)).astype(np.float32)
    return feeds


# ----------------------------------------------------------------------------------------
# Export and reference outputs


def run_torch(module, input_names, feeds):
    torch = _torch()
    with torch.no_grad():
        out = module(*[torch.from_numpy(feeds[n]) for n in input_names])
    if not isinstance(out, (tuple, list)):
        out = (out,)
    return [o.detach().cpu().numpy() for o in out]


def export(module, folder, input_names, output_names, dummy_feeds, dynamic_axes):
    torch = _torch()
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    args = tuple(torch.from_numpy(dummy_feeds[n]) for n in input_names)
    t0 = time.time()
    # Not under torch.no_grad(): there nn.MultiheadAttention (ViT) takes its fast path,
    # aten::_native_multi_head_attention, which torch 1.13 cannot export.
    torch.onnx.export(module, args, path, opset_version=OPSET, do_constant_folding=True,
                      input_names=input_names, output_names=output_names,
                      dynamic_axes=dynamic_axes, training=torch.onnx.TrainingMode.EVAL)
    onnx.checker.check_model(path)
    gi, go = graph_io_names(path)
    if gi != input_names or go != output_names:
        raise RuntimeError("%s: graph inputs %s outputs %s, expected %s %s"
                           % (path, gi, go, input_names, output_names))
    print("  exported %s (%.1f s, %.0f KB)" % (path, time.time() - t0,
                                                os.path.getsize(path) / 1024), flush=True)
    return path


def export_text(out, name, model, vocab, input_names, output_names, shapes, seed):
    module = text_wrapper(model, input_names)
    folder = os.path.join(out, name)
    axes = {n: {0: "batch", 1: "sequence"} for n in input_names}
    for n in output_names:
        axes[n] = {0: "batch", 1: "sequence"} if n != "pooler_output" else {0: "batch"}
    dummy = text_inputs(input_names, *TEXT_DUMMY, vocab, seed=999)
    export(module, folder, input_names, output_names, dummy, axes)
    for k, (b, s) in enumerate(shapes):
        feeds = text_inputs(input_names, b, s, vocab, seed=seed * 100 + k)
        write_data_set(os.path.join(folder, "test_data_set_%d" % k), input_names, output_names,
                       feeds, run_torch(module, input_names, feeds))


def export_vision(out, name, model, image, batches, seed):
    folder = os.path.join(out, name)
    axes = {"images": {0: "batch"}, "logits": {0: "batch"}}
    rng = np.random.RandomState(999)
    dummy = {"images": rng.normal(0, 1, size=(VISION_DUMMY, 3, image, image)).astype(np.float32)}
    export(model, folder, ["images"], ["logits"], dummy, axes)
    for k, b in enumerate(batches):
        rng = np.random.RandomState(seed * 100 + k)
        feeds = {"images": rng.normal(0, 1, size=(b, 3, image, image)).astype(np.float32)}
        write_data_set(os.path.join(folder, "test_data_set_%d" % k), ["images"], ["logits"],
                       feeds, run_torch(model, ["images"], feeds))


def export_gpt2_past(out, name, model, cfg):
    pin, pout = past_names(cfg.n_layer)
    input_names = ["input_ids", "attention_mask"] + pin
    output_names = ["logits"] + pout
    module = gpt2_past_wrapper(model, cfg.n_layer)
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total"},
            "logits": {0: "batch", 1: "sequence"}}
    for n in pin:
        axes[n] = {0: "batch", 2: "past"}
    for n in pout:
        axes[n] = {0: "batch", 2: "total"}
    folder = os.path.join(out, name)
    export(module, folder, input_names, output_names, past_inputs(cfg, *PAST_DUMMY, seed=999),
           axes)
    for k, (b, p, s) in enumerate(PAST_SHAPES):
        feeds = past_inputs(cfg, b, p, s, seed=400 + k)
        write_data_set(os.path.join(folder, "test_data_set_%d" % k), input_names, output_names,
                       feeds, run_torch(module, input_names, feeds))
    decode(folder, module, cfg, input_names, output_names)
    return module


def decode(folder, module, cfg, input_names, output_names):
    """Greedy decode with the cache model; writes decode/step_<n>/ and decode_reference.txt."""
    head_dim = cfg.n_embd // cfg.n_head
    pin, pout = past_names(cfg.n_layer)
    past = {n: np.zeros((1, cfg.n_head, 0, head_dim), np.float32) for n in pin}
    tokens = list(DECODE_PROMPT)
    ids = np.array([DECODE_PROMPT], np.int64)
    lines = ["# Greedy decode of gpt2_tiny_past (PyTorch %s, transformers, cache model)."
             % _torch().__version__,
             "# prompt: %s" % " ".join(map(str, DECODE_PROMPT)),
             "# step input_ids(comma-separated) total argmax top1_logit top2_logit margin"]
    generated = []
    for step in range(DECODE_STEPS):
        total = len(tokens)
        feeds = {"input_ids": ids, "attention_mask": np.ones((1, total), np.int64), **past}
        outs = run_torch(module, input_names, feeds)
        logits = outs[0]
        last = logits[0, -1]
        order = np.argsort(-last, kind="stable")
        nxt = int(order[0])
        sd = os.path.join(folder, "decode", "step_%d" % step)
        os.makedirs(sd, exist_ok=True)
        names = input_names if step == 0 else ["input_ids", "attention_mask"]
        for n in names:
            write_tensor(os.path.join(sd, "input_%d.pb" % input_names.index(n)), feeds[n], n)
        write_tensor(os.path.join(sd, "output_0.pb"), logits, "logits")
        lines.append("%d %s %d %d %.6f %.6f %.6f" % (
            step, ",".join(map(str, ids[0].tolist())), total, nxt, last[order[0]],
            last[order[1]], last[order[0]] - last[order[1]]))
        past = {pin[i]: outs[1 + i] for i in range(len(pin))}
        tokens.append(nxt)
        generated.append(nxt)
        ids = np.array([[nxt]], np.int64)
    lines.append("# generated: %s" % " ".join(map(str, generated)))
    with open(os.path.join(folder, "decode_reference.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    margins = [float(line.split()[-1]) for line in lines if not line.startswith("#")]
    print("  decode: %d tokens, smallest top-1/top-2 margin %.4g" % (len(generated), min(margins)))
    return tokens


def check_decode_against_full(cfg, tokens):
    """The cache decode's tokens must be the no-cache model's greedy choices too."""
    torch = _torch()
    model, _ = build_gpt2(use_cache=False)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([tokens]), return_dict=False)[0][0].numpy()
    n = len(DECODE_PROMPT)
    again = [int(np.argmax(logits[i])) for i in range(n - 1, len(tokens) - 1)]
    ok = again == tokens[n:]
    print("  decode check against the no-cache model: %s" % ("same tokens" if ok else "DIFFERENT"))
    return ok


def export_small(out):
    os.makedirs(out, exist_ok=True)
    print("bert_tiny", flush=True)
    bert, vocab = build_bert()
    export_text(out, "bert_tiny", bert, vocab, ["input_ids", "attention_mask", "token_type_ids"],
                ["last_hidden_state", "pooler_output"], TEXT_SHAPES, seed=1)
    print("distilbert_tiny", flush=True)
    distil, vocab = build_distilbert()
    export_text(out, "distilbert_tiny", distil, vocab, ["input_ids", "attention_mask"],
                ["last_hidden_state"], TEXT_SHAPES, seed=2)
    print("gpt2_tiny", flush=True)
    gpt2, cfg = build_gpt2(use_cache=False)
    export_text(out, "gpt2_tiny", gpt2, cfg.vocab_size, ["input_ids", "attention_mask"],
                ["logits"], TEXT_SHAPES, seed=3)
    print("gpt2_tiny_past", flush=True)
    gpt2c, cfg = build_gpt2(use_cache=True)
    same = all(torch_equal(a, b) for a, b in zip(gpt2.state_dict().values(),
                                                 gpt2c.state_dict().values()))
    assert same, "gpt2_tiny and gpt2_tiny_past must share weights"
    module = export_gpt2_past(out, "gpt2_tiny_past", gpt2c, cfg)
    toks = decode_tokens(os.path.join(out, "gpt2_tiny_past"))
    ok = check_decode_against_full(cfg, toks)
    print("vit_tiny", flush=True)
    export_vision(out, "vit_tiny", build_vit(), 32, VISION_BATCHES, seed=4)
    print("resnet_tiny", flush=True)
    export_vision(out, "resnet_tiny", build_resnet(), 32, VISION_BATCHES, seed=5)
    del module
    return ok


def export_full(out):
    os.makedirs(out, exist_ok=True)
    print("vit_b_16", flush=True)
    export_vision(out, "vit_b_16", build_vit(full=True), 224, FULL_VISION_BATCHES, seed=14)
    print("resnet10", flush=True)
    export_vision(out, "resnet10", build_resnet(full=True), 32, VISION_BATCHES, seed=15)
    print("bert_base", flush=True)
    bert, vocab = build_bert(full=True)
    export_text(out, "bert_base", bert, vocab, ["input_ids", "attention_mask", "token_type_ids"],
                ["last_hidden_state", "pooler_output"], FULL_TEXT_SHAPES, seed=11)
    del bert
    print("distilbert", flush=True)
    distil, vocab = build_distilbert(full=True)
    export_text(out, "distilbert", distil, vocab, ["input_ids", "attention_mask"],
                ["last_hidden_state"], FULL_TEXT_SHAPES, seed=12)
    del distil
    print("gpt2", flush=True)
    gpt2, cfg = build_gpt2(full=True, use_cache=False)
    export_text(out, "gpt2", gpt2, cfg.vocab_size, ["input_ids", "attention_mask"], ["logits"],
                FULL_TEXT_SHAPES, seed=13)


def torch_equal(a, b):
    return bool((a == b).all())


def decode_tokens(folder):
    with open(os.path.join(folder, "decode_reference.txt")) as f:
        for line in f:
            if line.startswith("# generated:"):
                gen = [int(t) for t in line.split(":", 1)[1].split()]
                return list(DECODE_PROMPT) + gen
    raise RuntimeError("no generated tokens")


# ----------------------------------------------------------------------------------------
# Checking with onnxruntime


def load_data_set(folder):
    ins, outs = {}, []
    for f in sorted(os.listdir(folder), key=lambda s: (s.split("_")[0], int(s[:-3].split("_")[1]))):
        name, value = read_tensor(os.path.join(folder, f))
        if f.startswith("input_"):
            ins[name] = value
        else:
            outs.append((name, value))
    return ins, outs


def compare(got, ref):
    got = got.astype(np.float64)
    ref = ref.astype(np.float64)
    if got.shape != ref.shape:
        return None
    diff = np.abs(got - ref)
    scale = max(np.max(np.abs(ref)), 1e-30) if ref.size else 1.0
    max_abs = float(np.max(diff)) if diff.size else 0.0
    return max_abs, max_abs / scale


def check_dir(root):
    try:
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime is not installed: no check")
        return None
    ok = True
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        model = os.path.join(folder, "model.onnx")
        if not os.path.isfile(model):
            continue
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 2
        sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        onames = [o.name for o in sess.get_outputs()]
        sets = sorted((d for d in os.listdir(folder) if d.startswith("test_data_set_")),
                      key=lambda d: int(d.rsplit("_", 1)[1]))
        for d in sets:
            ins, outs = load_data_set(os.path.join(folder, d))
            got = sess.run(onames, ins)
            shapes = " ".join("%s%s" % (k, list(v.shape)) for k, v in ins.items()
                              if not k.startswith("past_key_values") or k.endswith("0.key"))
            worst = 0.0
            parts = []
            for (oname, ref), g in zip(outs, got):
                r = compare(g, ref)
                if r is None:
                    parts.append("%s SHAPE %s != %s" % (oname, list(g.shape), list(ref.shape)))
                    worst = float("inf")
                    continue
                parts.append("%s abs %.2e rel %.2e" % (oname, r[0], r[1]))
                worst = max(worst, r[1])
            good = worst < 1e-4
            ok &= good
            print("%-16s %-16s %s  %s: %s" % (name, d, "ok  " if good else "FAIL", shapes,
                                              "; ".join(parts[:3]) +
                                              ("; ..." if len(parts) > 3 else "")))
        dec = os.path.join(folder, "decode")
        if os.path.isdir(dec):
            ok &= check_decode(sess, dec, onames)
    return ok


def check_decode(sess, dec, onames):
    """Run the decode steps with onnxruntime, feeding presents back as the past."""
    steps = sorted(os.listdir(dec), key=lambda d: int(d.split("_")[1]))
    past = {}
    worst, same = 0.0, True
    for d in steps:
        ins, outs = load_data_set(os.path.join(dec, d))
        feeds = dict(past)
        feeds.update(ins)
        got = sess.run(onames, feeds)
        r = compare(got[0], outs[0][1])
        worst = max(worst, r[1] if r else float("inf"))
        same &= int(np.argmax(got[0][0, -1])) == int(np.argmax(outs[0][1][0, -1]))
        past = {n.replace("present", "past_key_values"): v for n, v in zip(onames[1:], got[1:])}
    good = worst < 1e-4 and same
    print("%-16s %-16s %s  %d steps, logits rel %.2e, same argmax: %s"
          % (os.path.basename(os.path.dirname(dec)), "decode", "ok  " if good else "FAIL",
             len(steps), worst, same))
    return good


# ----------------------------------------------------------------------------------------
# --describe: op types and the shape-computing subgraphs


SHAPE_SOURCES = {"Shape", "Size"}
# Ops that compute on shape values: their output stays a shape value when every input that is
# not a constant is one (used where shape inference does not know the output's rank).
SHAPE_ARITH = {"Gather", "Concat", "Unsqueeze", "Squeeze", "Cast", "Add", "Sub", "Mul", "Div",
               "Equal", "Where", "ConstantOfShape", "Slice", "Neg", "Abs", "Max", "Min",
               "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Mod",
               "Floor", "Ceil", "Sqrt", "Reciprocal", "ReduceProd", "Identity", "Shape", "Size",
               "Reshape", "Pow"}
# Attributes left out of the expressions when they have these values.
DEFAULT_ATTRS = {("Gather", "axis"): 0, ("Concat", "axis"): 0, ("Reshape", "allowzero"): 0}


def _short(name):
    """/model/encoder/layer.0/attention/self/Shape_output_0 -> encoder/layer.0/attention/self/Shape"""
    if name.startswith("/model/"):
        name = name[len("/model/"):]
    elif name.startswith("/"):
        name = name[1:]
    if name.endswith("_output_0"):
        name = name[:-len("_output_0")]
    return name


def _attr_value(a):
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, onnx.TensorProto):
        v = _fmt_array(numpy_helper.to_array(v))
    if a.name == "to" and isinstance(v, int):
        v = onnx.TensorProto.DataType.Name(v).lower()
    return v


def _fmt_array(arr):
    dt = {"int64": "i64", "int32": "i32", "float32": "f32", "bool": "bool"}.get(str(arr.dtype),
                                                                               str(arr.dtype))
    if arr.ndim == 0:
        v = arr.item()
        if isinstance(v, float) and abs(v) > 1e30:
            v = "%.4g" % v
        return "%s:%s" % (v, dt)
    if arr.size <= 16:
        vals = ["INT64_MAX" if v == 2 ** 63 - 1 else ("%.4g" % v if isinstance(v, float) else v)
                for v in arr.reshape(-1).tolist()]
        if arr.ndim == 1:
            return "[%s]:%s" % (",".join(map(str, vals)), dt)
        return "%s%s:%s" % (vals, list(arr.shape), dt)
    return "<%s %s>" % (dt, "x".join(map(str, arr.shape)))


def describe(path, out=sys.stdout):
    model = onnx.load(path)
    g = model.graph
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True).graph
    except Exception as e:  # shape inference is only a help
        print("(shape inference failed: %s)" % e, file=out)
        inferred = g
    info = {}
    for vi in list(inferred.value_info) + list(inferred.input) + list(inferred.output):
        tt = vi.type.tensor_type
        dims = None
        if tt.HasField("shape"):
            dims = [d.dim_param or (str(d.dim_value) if d.HasField("dim_value") else "?")
                    for d in tt.shape.dim]
        info[vi.name] = (onnx.TensorProto.DataType.Name(tt.elem_type), dims)
    consts = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    producer = {o: n for n in g.node for o in n.output}

    counts = {}
    for n in g.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    print("model %s: opset %s, %d nodes, %d initializers" % (
        path, ",".join("%s:%d" % (o.domain or "ai.onnx", o.version) for o in model.opset_import),
        len(g.node), len(g.initializer)), file=out)
    print("inputs:  " + ", ".join("%s %s%s" % (i.name, info.get(i.name, ("?", None))[0].lower(),
                                               info.get(i.name, ("?", None))[1])
                                  for i in g.input if i.name not in consts), file=out)
    print("outputs: " + ", ".join("%s %s" % (o.name, info.get(o.name, ("?", None))[1])
                                  for o in g.output), file=out)
    print("op types (%d): %s" % (len(counts), ", ".join(
        "%s x%d" % (k, v) for k, v in sorted(counts.items()))), file=out)

    # Forward from every Shape/Size node, in graph order: a node with a shape-valued input is
    # part of a shape subgraph. Its outputs are shape values while they are small tensors (rank
    # 0, or rank 1 of known length <= 8, by shape inference; or, rank unknown, an arithmetic op
    # of shape values); otherwise the node ends a chain: it uses shapes to make data.
    shape_vals = set()
    members = []  # (node, slots of shape-valued inputs, output is a shape value)
    for n in g.node:
        slots = [i for i, x in enumerate(n.input) if x in shape_vals]
        if n.op_type in SHAPE_SOURCES:
            shape_vals.update(n.output)
            members.append((n, slots, True))
            continue
        if not slots:
            continue
        data_ins = [x for x in n.input if x and x not in consts]
        all_shape = all(x in shape_vals for x in data_ins)
        is_shape = n.op_type != "Range"  # positions: data
        for o in n.output:
            dims = info.get(o, (None, None))[1]
            if dims is not None:
                small = len(dims) == 0 or (len(dims) == 1 and dims[0].isdigit()
                                           and int(dims[0]) <= 8)
                is_shape &= small
            else:
                is_shape &= n.op_type in SHAPE_ARITH and all_shape
        if is_shape:
            shape_vals.update(n.output)
        members.append((n, slots, is_shape))

    # 1. Each chain's end as one expression, the data tensors named X, Y, ... so that the
    # repeated ones (one per layer) collapse into one pattern with a count.
    def expr(v, names):
        if v == "":
            return "_"
        if v in consts:
            return _fmt_array(consts[v])
        if v not in shape_vals or v not in producer:
            if v not in names:
                names[v] = "XYZUVW"[len(names)] if len(names) < 6 else "T%d" % len(names)
            return names[v]
        n = producer[v]
        args = [expr(x, names) for x in n.input]
        attrs = ["%s=%s" % (a.name, _attr_value(a)) for a in n.attribute
                 if DEFAULT_ATTRS.get((n.op_type, a.name)) != onnx.helper.get_attribute_value(a)]
        suffix = "" if len(n.output) == 1 else "#%d" % list(n.output).index(v)
        return "%s(%s)%s" % (n.op_type, ", ".join(args + attrs), suffix)

    patterns = {}
    for n, slots, is_shape in members:
        if is_shape:
            continue
        names = {}
        text = expr_node(n, names, expr)
        srcs = ", ".join("%s=%s" % (k, _short(v)) for v, k in names.items())
        p = patterns.setdefault(text, [0, srcs, n.name])
        p[0] += 1
    print("\nshape chains: %d nodes take shapes computed from Shape/Size; as expressions "
          "(data tensors X, Y, ...; one example each):" % sum(p[0] for p in patterns.values()),
          file=out)
    for text, (count, srcs, name) in patterns.items():
        print("  %dx %s\n       e.g. %s: %s" % (count, text, _short(name), srcs), file=out)
    used = {x for m in g.node for x in m.input} | {y.name for y in g.output}
    dangling = [n for n, slots, is_shape in members
                if is_shape and not any(o in used for o in n.output)]
    if dangling:
        print("  (shape values nobody reads: %s)" % ", ".join(_short(n.name) for n in dangling),
              file=out)

    # 2. Every node of the shape subgraphs, in graph order.
    print("\nshape subgraph nodes (%d; '=>': the chain ends here, '*': a shape-valued input):"
          % len(members), file=out)
    for n, slots, is_shape in members:
        args = []
        for i, x in enumerate(n.input):
            if x in consts:
                args.append(_fmt_array(consts[x]))
            else:
                args.append(("*" if i in slots else "") + _short(x))
        outs = ["%s%s" % (_short(o), "" if info.get(o, (0, None))[1] is None
                          else info[o][1]) for o in n.output]
        attrs = ["%s=%s" % (a.name, _attr_value(a)) for a in n.attribute]
        print("  %s %-15s %s(%s)%s -> %s" % (
            "  " if is_shape else "=>", n.op_type, _short(n.name),
            ", ".join(args), (" {" + ", ".join(attrs) + "}") if attrs else "", ", ".join(outs)),
            file=out)
    return counts


def expr_node(n, names, expr):
    """A chain's last node as an expression: its data inputs named, its shape inputs expanded."""
    args = [expr(x, names) for x in n.input]
    attrs = ["%s=%s" % (a.name, _attr_value(a)) for a in n.attribute
             if DEFAULT_ATTRS.get((n.op_type, a.name)) != onnx.helper.get_attribute_value(a)]
    return "%s(%s)" % (n.op_type, ", ".join(args + attrs))


# ----------------------------------------------------------------------------------------


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=DEFAULT_OUT, help="folder for the small models")
    p.add_argument("--full", metavar="OUT_DIR", help="export the full-size models there instead")
    p.add_argument("--check", metavar="DIR", help="check every model under DIR with onnxruntime")
    p.add_argument("--describe", metavar="MODEL", help="print op types and shape subgraphs")
    p.add_argument("--no-check", action="store_true", help="skip the onnxruntime check")
    a = p.parse_args(argv)
    if a.describe:
        describe(a.describe)
        return 0
    if a.check:
        return 0 if check_dir(a.check) in (True, None) else 1
    t0 = time.time()
    if a.full:
        export_full(a.full)
        root = a.full
        ok = True
    else:
        ok = export_small(a.out)
        root = a.out
    print("exported in %.0f s" % (time.time() - t0))
    if not a.no_check:
        ok &= check_dir(root) in (True, None)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
