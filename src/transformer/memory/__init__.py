"""How much memory does one training step take? An estimate, line by line, and a measurement.

* :mod:`~transformer.memory.estimate`: :func:`estimate_training_memory`, the peak of a step of
  this package's models with Adam, from per-part byte counts (:mod:`~transformer.memory.parameters`,
  :mod:`~transformer.memory.activations`);
* :mod:`~transformer.memory.measure`: :func:`measure_training_peak`, the peak of real steps
  (``torch.cuda`` on a GPU, :class:`LiveTensorBytes` on the CPU);
* :mod:`~transformer.memory.gpt2_formula`: :func:`seed_formula_estimate`, the seed tutorial's GPT-2
  formula, kept term for term;
* :mod:`~transformer.memory.report`: :func:`format_report` and :func:`format_bytes`;
* :mod:`~transformer.memory.setting`: :class:`TrainingStep`, the step all three size and its
  check, and :func:`batch_for_tokens`;
* :mod:`~transformer.memory.job`: :func:`memory_job`, what the ``memory`` verb asks: the batch,
  then the seed formula or the estimate (and the measurement).
"""

from transformer.memory.estimate import MemoryEstimate, MemoryLine, estimate_training_memory
from transformer.memory.gpt2_formula import seed_formula_estimate
from transformer.memory.job import MemoryResult, memory_job
from transformer.memory.measure import LiveTensorBytes, MeasuredPeak, measure_training_peak
from transformer.memory.parameters import parameter_count
from transformer.memory.report import format_bytes, format_report
from transformer.memory.setting import TrainingStep, batch_for_tokens

__all__ = [
    "LiveTensorBytes",
    "MeasuredPeak",
    "MemoryEstimate",
    "MemoryLine",
    "MemoryResult",
    "TrainingStep",
    "batch_for_tokens",
    "estimate_training_memory",
    "format_bytes",
    "format_report",
    "measure_training_peak",
    "memory_job",
    "parameter_count",
    "seed_formula_estimate",
]
