"""The model directory (DESIGN.md): its record (``config.json``, typed), its weights
(safetensors) and the one loader every verb, the server and Python read a model through.

    loaded = load_model_dir("runs/m30k")    # model, record, tokenizers
    record = read_record("runs/m30k")       # config.json alone, parsed and checked
"""

from typing import TYPE_CHECKING

from transformer.lazy_names import lazy_names

if TYPE_CHECKING:
    from transformer.model_dir.directory import (
        TOKENIZER_DIR,
        LoadedModel,
        TextTokenizer,
        build_checked,
        build_model,
        check_vocabulary,
        load_model_dir,
        load_tokenizer_dir,
        save_model_dir,
        unwrap,
    )
    from transformer.model_dir.record import (
        CONFIG_FILE,
        FORMAT_VERSION,
        ClassifierHead,
        RunRecord,
        TrainedOn,
        read_config,
        read_record,
    )
    from transformer.model_dir.weights import (
        WEIGHTS_FILE,
        check_record,
        check_weights,
        header_shapes,
        load_weights,
        save_weights,
    )

__all__ = [
    "CONFIG_FILE", "FORMAT_VERSION", "TOKENIZER_DIR", "WEIGHTS_FILE", "ClassifierHead",
    "LoadedModel", "RunRecord", "TextTokenizer", "TrainedOn", "build_checked", "build_model",
    "check_record", "check_vocabulary", "check_weights", "header_shapes", "load_model_dir", "load_tokenizer_dir",
    "load_weights", "read_config", "read_record", "save_model_dir", "save_weights", "unwrap",
]
__getattr__, __dir__ = lazy_names(__name__, {
    "transformer.model_dir.directory": ("TOKENIZER_DIR", "LoadedModel", "TextTokenizer", "build_checked", "build_model", "check_vocabulary", "load_model_dir", "load_tokenizer_dir", "save_model_dir", "unwrap"),
    "transformer.model_dir.record": ("CONFIG_FILE", "FORMAT_VERSION", "ClassifierHead", "RunRecord", "TrainedOn", "read_config", "read_record"),
    "transformer.model_dir.weights": ("WEIGHTS_FILE", "check_record", "check_weights", "header_shapes", "load_weights", "save_weights"),
})
