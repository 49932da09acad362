"""A candidate's predictions as stored bytes and back: the arrays of a
``CandidatePredictions`` in one ``np.savez_compressed`` archive, read with
``allow_pickle=False`` (instance ids are a fixed-width unicode array, never
objects). Pure: NumPy only."""

import io

import numpy as np

from .predictions import CandidatePredictions


def arrays_pack(predictions: CandidatePredictions) -> tuple[bytes, list[str]]:
    """The archive of the candidate's arrays, and the optional ones it holds
    (in ``CandidatePredictions.OPTIONAL``'s order)."""
    columns = predictions.columns
    arrays = {"y_true": predictions.y_true}
    for name in columns:
        values = getattr(predictions, name)
        # Instance ids as a unicode array: an object array would need pickle.
        arrays[name] = values.astype(str) if name == "instance" else values
    buffer = io.BytesIO()
    # No object arrays, so no pickle, either way (as arrays_unpack reads it).
    np.savez_compressed(buffer, allow_pickle=False, **arrays)
    return buffer.getvalue(), columns


def arrays_unpack(name: str, archive: bytes) -> CandidatePredictions:
    """The ``CandidatePredictions`` of an archive made by ``arrays_pack``."""
    with np.load(io.BytesIO(archive), allow_pickle=False) as stored:
        unknown = set(stored.files) - {"y_true", *CandidatePredictions.OPTIONAL}
        if unknown or "y_true" not in stored.files:
            raise ValueError(f"not an archive of predictions: it holds {sorted(stored.files)}")
        return CandidatePredictions(name=name, **{key: stored[key] for key in stored.files})
