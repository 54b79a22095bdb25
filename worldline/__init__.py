"""worldline: collect, clean and pool agent trajectories for language world models.

Notebook entry points: `open_dataset(path)` gives a lazy polars frame over trajectory shards or a
pool folder (OUT/cpt, OUT/sft, OUT/rl), `token_weights(text, spans, tokenizer)` per-token CPT loss
weights,
`get_trajectory(path, id)` one trajectory as the typed model (which renders as HTML in Jupyter), and
`iter_trajectories(path)` streams them all.
"""

from schemas import (
    SCHEMA_VERSION,
    Trajectory,
    get_trajectory,
    iter_trajectories,
)
from worldline.pools import open_dataset, token_weights

__version__ = "0.1.0"

__all__ = [
    "SCHEMA_VERSION",
    "Trajectory",
    "__version__",
    "get_trajectory",
    "iter_trajectories",
    "open_dataset",
    "token_weights",
]
