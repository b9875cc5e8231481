#!/usr/bin/env python3
"""Exports the models of the warm-up measurement to ONNX (random weights, eval mode, opset 17).

    python3 bench/export_models.py OUT_DIR [--bert]

resnet18.onnx: torchvision's resnet18, static input [1, 3, 224, 224] (python3-torch and
python3-torchvision from Debian). With --bert, bert_base.onnx: transformers' BertModel with
bert-base's configuration (BertConfig() defaults, no download), static input_ids and
attention_mask [1, 128] (needs `pip install transformers==4.30.*` in a virtual environment with
system site packages). These are peers for benchmarks, never dependencies of Kiln.
"""
import os
import sys

import torch


def export_resnet18(out_dir):
    import torchvision
    torch.manual_seed(0)
    m = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    path = os.path.join(out_dir, "resnet18.onnx")
    torch.onnx.export(m, (x,), path, opset_version=17, input_names=["x"], output_names=["y"])
    return path


def export_bert(out_dir):
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    m = BertModel(BertConfig()).eval()
    ids = torch.randint(0, 30522, (1, 128))
    mask = torch.ones(1, 128, dtype=torch.int64)
    path = os.path.join(out_dir, "bert_base.onnx")
    torch.onnx.export(m, (ids, mask), path, opset_version=17, input_names=["input_ids", "attention_mask"],
                      output_names=["last_hidden_state", "pooler_output"])
    return path


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    with torch.no_grad():
        print(export_resnet18(out_dir))
        if "--bert" in sys.argv:
            print(export_bert(out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
