"""The checker's reading of a config: the library's JSON config for one
array, with its defaults filled in (dtype, dimensions and their units,
scales and translations, the pyramid's levels and method, the OME
metadata asked for). Used by check_ome.py and check_arrays.py."""

from __future__ import annotations

import json

import numpy as np

from check_store import DTYPES, CheckError
from ome_pyramid import level_shape

METHODS = ("decimate", "mean", "min", "max", "median")
KIND_OF_NAME = {"t": "time", "c": "channel", "z": "space", "y": "space", "x": "space"}


class Spec:
    """What the checker needs from a config, with the defaults filled in."""

    def __init__(self, cfg, where="config"):
        if not isinstance(cfg, dict):
            raise CheckError("%s: not a JSON object" % where)
        self.where = where
        dt = cfg.get("dtype")
        if dt not in DTYPES:
            raise CheckError("%s: dtype %r is not one of %s" % (where, dt, ", ".join(DTYPES)))
        self.dtype = np.dtype(dt)
        dims = cfg.get("dimensions")
        if not isinstance(dims, list) or not dims:
            raise CheckError("%s: dimensions must be a non-empty list" % where)
        self.names, self.sizes, self.tiles, self.kinds, self.units = [], [], [], [], []
        self.scales, self.translations, self.downsample = [], [], []
        for i, d in enumerate(dims):
            if not isinstance(d, dict):
                raise CheckError("%s: dimensions[%d] is not an object" % (where, i))
            name = d.get("name", "d%d" % i)
            kind = d.get("kind", KIND_OF_NAME.get(name, "other"))
            size = d.get("size")
            if not isinstance(size, int) or size < 0 or (size == 0 and i > 0):
                raise CheckError("%s: dimensions[%d] (%s): size %r (only dimension 0 may be 0, unbounded)"
                                 % (where, i, name, size))
            tile = d.get("tile")
            if tile is not None and (not isinstance(tile, int) or tile < 1):
                raise CheckError("%s: dimensions[%d] (%s): tile %r" % (where, i, name, tile))
            ds = d.get("downsample", kind == "space")
            if not isinstance(ds, bool):
                raise CheckError("%s: dimensions[%d] (%s): downsample %r is not a boolean"
                                 % (where, i, name, ds))
            self.names.append(name)
            self.sizes.append(size)
            self.tiles.append(tile)
            self.kinds.append(kind)
            self.units.append(d.get("unit"))
            self.scales.append(float(d.get("scale", 1.0)))
            self.translations.append(float(d.get("translation", 0.0)))
            self.downsample.append(ds)
        if len(set(self.names)) != len(self.names):
            raise CheckError("%s: dimension names are not unique: %s" % (where, self.names))
        self.rank = len(self.names)

        order = cfg.get("storage_order", self.names)
        if sorted(order) != sorted(self.names):
            raise CheckError("%s: storage_order %s is not a permutation of %s" % (where, order, self.names))
        self.storage_order = list(order)
        self.perm = tuple(self.names.index(n) for n in order)

        ms = cfg.get("multiscale")
        ome = cfg.get("ome")
        self.has_multiscale = ms is not None
        if ms is None:
            ms = {}
        if not isinstance(ms, dict):
            raise CheckError("%s: multiscale must be an object" % where)
        self.method = ms.get("method", "mean")
        if self.method not in METHODS:
            raise CheckError("%s: multiscale.method %r is not one of %s" % (where, self.method, METHODS))
        # levels absent from a multiscale block: 0, as many as it takes
        levels = ms.get("levels", 0) if self.has_multiscale else 1
        if not isinstance(levels, int) or levels < 0:
            raise CheckError("%s: multiscale.levels %r" % (where, levels))
        self.levels = self._auto_levels() if levels == 0 else levels
        self.ome = bool(ome) or self.has_multiscale
        self.ome_name = ome.get("name") if isinstance(ome, dict) else None
        self.omero = ome.get("omero") if isinstance(ome, dict) else None
        attrs = cfg.get("attributes", {})
        if not isinstance(attrs, dict):
            raise CheckError("%s: attributes must be an object" % where)
        self.attributes = attrs
        if not self.ome and self.levels != 1:
            raise CheckError("%s: %d levels without OME output" % (where, self.levels))

    def _auto_levels(self):
        """Smallest L such that at level L-1 every downsampled bounded dimension fits one tile."""
        dims = [i for i in range(self.rank) if self.downsample[i] and self.sizes[i] > 0]
        for i in dims:
            if self.tiles[i] is None:
                raise CheckError("%s: multiscale.levels 0 needs the tile of %s" % (self.where, self.names[i]))
        sizes = list(self.sizes)
        levels = 1
        while any(sizes[i] > self.tiles[i] for i in dims):
            sizes = level_shape(sizes, self.downsample, 1)
            levels += 1
        return levels

    def level_shapes(self, extent0):
        """Level shapes in acquisition order, dimension 0 of level 0 being extent0."""
        s0 = [extent0] + self.sizes[1:]
        return [level_shape(s0, self.downsample, k) for k in range(self.levels)]

    def to_storage(self, seq):
        return [seq[p] for p in self.perm]

    # the expected OME metadata
    def axes(self):
        out = []
        for p in self.perm:
            ax = {"name": self.names[p]}
            if self.kinds[p] != "other":
                ax["type"] = self.kinds[p]
            if self.units[p] is not None:
                ax["unit"] = self.units[p]
            out.append(ax)
        return out

    def transforms(self, k):
        """(scale, translation) of level k in storage order."""
        scale, trans = [], []
        for p in self.perm:
            s, t = self.scales[p], self.translations[p]
            if self.downsample[p] and k:
                f = 2 ** k
                if self.method != "decimate":
                    t = t + s * (f - 1) / 2
                s = s * f
            scale.append(s)
            trans.append(t)
        return scale, trans

    def datasets(self):
        out = []
        for k in range(self.levels):
            scale, trans = self.transforms(k)
            ct = [{"type": "scale", "scale": scale}]
            if any(t != 0 for t in trans):
                ct.append({"type": "translation", "translation": trans})
            out.append({"path": str(k), "coordinateTransformations": ct})
        return out


def load_config(path):
    try:
        with open(path) as f:
            cfg = json.load(f)
    except OSError as e:
        raise CheckError("config %s: %s" % (path, e))
    except ValueError as e:
        raise CheckError("config %s is not JSON: %s" % (path, e))
    return Spec(cfg, "config %s" % path)
