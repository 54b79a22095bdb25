"""worldline: collect, clean and pool agent trajectories for language world models.

Notebook entry points: `open_dataset(path)` gives a lazy polars frame over trajectory shards,
`get_trajectory(path, id)` one trajectory as the typed model (which renders as HTML in Jupyter), and
`iter_trajectories(path)` streams them all.
"""

from schemas import (
    SCHEMA_VERSION,
    Trajectory,
    get_trajectory,
    iter_trajectories,
    open_dataset,
)

__version__ = "0.1.0"

__all__ = [
    "SCHEMA_VERSION",
    "Trajectory",
    "__version__",
    "get_trajectory",
    "iter_trajectories",
    "open_dataset",
]
