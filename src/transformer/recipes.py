"""Training recipes: a model shape, training options and a time budget under one name.

``transformer train --preset multi30k-cpu`` starts from a recipe; any flag given beside it
overrides the recipe's value. Plain data (no torch import), so the command line can list them.
"""

from __future__ import annotations

from typing import Any

RECIPES: dict[str, dict[str, Any]] = {
    # The README's one-hour result: Multi30k on a 2-core CPU, both cores (--threads 2), bf16
    # autocast. See the README's results section for how it was chosen (levers measured against
    # each other). The budget is 60 minutes or 5600 updates, whichever comes first; the rate cools
    # down linearly over the last 1800 updates (on that CPU the 60 minutes end first, at
    # about update 5,200, when the rate is down to a fifth).
    "multi30k-cpu": {
        "preset": "small",
        "model": {
            "d_model": 128, "num_heads": 4, "num_encoder_layers": 4, "num_decoder_layers": 4,
            "d_ff": 256, "dropout": 0.2, "share_embeddings": True, "tie_embeddings": True,
        },
        "training": {
            "vocab_size": 8000, "max_tokens": 4096, "precision": "bf16",
            "schedule": "inverse_sqrt", "lr": 2e-3, "warmup": 400, "label_smoothing": 0.1,
            "eval_every": 200, "average_last": 5, "cooldown": 1800,
        },
        "stop": {"minutes": 60.0, "max_steps": 5600},
    },
}
