"""sa1b.mask: a drop-in for pycocotools.mask over libsa1b's RLE codec.

    import sa1b.mask as mask_util     # instead of: import pycocotools.mask as mask_util

encode, decode, area, toBbox, iou, merge and frPyObjects (frBbox, frPoly,
frUncompressedRLE) take and return what pycocotools' do: RLE dicts
{'size': [h, w], 'counts': bytes}, uint8 masks [h, w, n] in Fortran order,
uint32 areas, float64 boxes [n, 4], IoU matrices [m, n] in Fortran order,
the same errors for the same misuse.  The results are bit-identical (the
test suite checks them against pycocotools itself).

Where they differ, on purpose:
  * counts strings are validated: a character outside '0'..'o', a string
    that ends inside a number, runs that do not add up to h*w raise
    ValueError naming the object (pycocotools reads past the end, or
    returns whatever memory held);
  * decode([]) and masks of different sizes in one call raise ValueError;
  * polygon and box coordinates must be finite and within +-4.29e8 (an
    edge shorter than 2^31-1 steps of 1/5 pixel), else ValueError (where
    pycocotools' int arithmetic overflows: a crash, or gigabytes);
  * encode takes any nonzero byte as foreground (pycocotools compares each
    byte with 0 or 1, so a mask holding 2 or 255 gets other runs).

And what pycocotools lacks:
  * decode(rles, size=(h, w), resample="nearest" | "area"): masks decoded
    straight from the runs at another resolution, never building the full
    one ("nearest": the source pixel under each target cell's centre;
    "area": 1 where at least half the cell is covered);
  * sa1b_bbox(rles): SA-1B's boxes (width and height are max - min, one
    less than COCO's).
"""
import numpy as np

from sa1b import _sa1b

__all__ = ["encode", "decode", "area", "toBbox", "sa1b_bbox", "iou", "merge", "frPyObjects",
           "frBbox", "frPoly", "frUncompressedRLE"]


def encode(bimask):
    """encode(mask): [h, w] -> one RLE dict; [h, w, n] (uint8, Fortran order) -> a list."""
    if len(bimask.shape) == 3:
        return _sa1b._encode(bimask)
    elif len(bimask.shape) == 2:
        h, w = bimask.shape
        return _sa1b._encode(bimask.reshape((h, w, 1), order='F'))[0]


_RESAMPLE = {"nearest": 1, "area": 2}


def decode(rleObjs, size=None, resample="nearest"):
    """decode(rle) -> [h, w] uint8; decode([rle, ...]) -> [h, w, n] (Fortran order).

    size=(h, w) decodes straight from the runs to that size; resample is
    "nearest" (the pixel under each cell's centre) or "area" (1 where the
    cell is at least half covered)."""
    if size is None:
        args = ()
    else:
        if resample not in _RESAMPLE:
            raise ValueError("decode: resample must be 'nearest' or 'area', not %r" % (resample,))
        rh, rw = size
        args = (int(rh), int(rw), _RESAMPLE[resample])
    if type(rleObjs) == list:
        return _sa1b._decode(rleObjs, *args)
    else:
        return _sa1b._decode([rleObjs], *args)[:, :, 0]


def area(rleObjs):
    """area(rle) -> uint32; area([rle, ...]) -> uint32 [n]"""
    if type(rleObjs) == list:
        return _sa1b._area(rleObjs)
    else:
        return _sa1b._area([rleObjs])[0]


def toBbox(rleObjs):
    """toBbox(rle) -> float64 [4] (x, y, w, h; COCO: w = xmax - xmin + 1);
    toBbox([rle, ...]) -> [n, 4]"""
    if type(rleObjs) == list:
        return _sa1b._bbox(rleObjs, False)
    else:
        return _sa1b._bbox([rleObjs], False)[0]


def sa1b_bbox(rleObjs):
    """sa1b_bbox(rle) -> float64 [4], SA-1B's convention (w = xmax - xmin, as
    the bbox field of SA-1B files); a list gives [n, 4]"""
    if type(rleObjs) == list:
        return _sa1b._bbox(rleObjs, True)
    else:
        return _sa1b._bbox([rleObjs], True)[0]


class _RLEs(list):
    """A list of RLE dicts that _preproc recognised (pycocotools' RLEs)."""


def _preproc(objs):
    if len(objs) == 0:
        return objs
    if type(objs) == np.ndarray:
        if len(objs.shape) == 1:
            objs = objs.reshape((objs[0], 1))
        if not len(objs.shape) == 2 or not objs.shape[1] == 4:
            raise Exception('numpy ndarray input is only for *bounding boxes* and should have Nx4 dimension')
        objs = objs.astype(np.double)
    elif type(objs) == list:
        isbox = np.all(np.array([(len(obj) == 4) and ((type(obj) == list) or (type(obj) == np.ndarray))
                                 for obj in objs]))
        isrle = np.all(np.array([type(obj) == dict for obj in objs]))
        if isbox:
            objs = np.array(objs, dtype=np.double)
            if len(objs.shape) == 1:
                objs = objs.reshape((1, objs.shape[0]))
        elif isrle:
            objs = _RLEs(objs)
        else:
            raise Exception('list input can be bounding box (Nx4) or RLEs ([RLE])')
    else:
        raise Exception('unrecognized type.  The following type: RLEs (rle), np.ndarray (box), '
                        'and list (box) are supported.')
    return objs


def iou(dt, gt, pyiscrowd):
    """iou(dt, gt, iscrowd) -> float64 [m, n] (Fortran order): dt and gt both
    lists of RLEs, or both boxes ([n, 4] arrays or lists of [x, y, w, h]);
    with iscrowd[j], |dt & gt| / |dt| instead of the union.  [] when either
    is empty."""
    iscrowd = np.array(pyiscrowd, dtype=np.uint8)
    dt = _preproc(dt)
    gt = _preproc(gt)
    m = len(dt) if isinstance(dt, list) else (dt.shape[0] if len(dt) else 0)
    n = len(gt) if isinstance(gt, list) else (gt.shape[0] if len(gt) else 0)
    assert iscrowd.ndim == 1 and iscrowd.shape[0] == n, 'iou(iscrowd=) must have the same length as gt'
    if m == 0 or n == 0:
        return []
    if not type(dt) == type(gt):
        raise Exception('The dt and gt should have the same data type, either RLEs, list or np.ndarray')
    if type(dt) == _RLEs:
        o = _sa1b._rle_iou(dt, gt, iscrowd)
    elif type(dt) == np.ndarray:
        o = _sa1b._bb_iou(np.ascontiguousarray(dt), np.ascontiguousarray(gt), iscrowd)
    else:
        raise Exception('input data type not allowed.')
    return o.reshape((m, n), order='F')


def merge(rleObjs, intersect=0):
    """merge([rle, ...], intersect=0) -> RLE: the union (intersect=1: the
    intersection) of masks of one size"""
    if len(rleObjs) == 0:
        return {'size': [0, 0], 'counts': b''}  # pycocotools' answer for nothing
    return _sa1b._merge(rleObjs, bool(intersect))


def frBbox(bb, h, w):
    """frBbox(bb [n, 4] float64 ndarray, h, w) -> [RLE]"""
    if type(bb) != np.ndarray:
        raise TypeError("Argument 'bb' has incorrect type (expected numpy.ndarray, got %s)"
                        % type(bb).__name__)
    return _sa1b._fr_bbox(np.ascontiguousarray(bb, dtype=np.double), h, w)


def frPoly(poly, h, w):
    """frPoly([[x0, y0, x1, y1, ...], ...], h, w) -> [RLE], rasterised as pycocotools does"""
    return _sa1b._fr_poly([np.array(p, dtype=np.double).ravel(order='F') for p in poly], h, w)


def frUncompressedRLE(ucRles, h, w):
    """frUncompressedRLE([{'size': [h, w], 'counts': [runs]}], h, w) -> [RLE]
    (the sizes of the objects are used, as pycocotools does)"""
    return _sa1b._fr_uncompressed(ucRles)


def frPyObjects(pyobj, h, w):
    """frPyObjects(boxes | polygons | uncompressed RLEs, h, w) -> [RLE], or one
    RLE for a single polygon, box or uncompressed RLE"""
    if type(pyobj) == np.ndarray:
        objs = frBbox(pyobj, h, w)
    elif type(pyobj) == list and len(pyobj[0]) == 4:
        objs = frBbox(pyobj, h, w)
    elif type(pyobj) == list and len(pyobj[0]) > 4:
        objs = frPoly(pyobj, h, w)
    elif type(pyobj) == list and type(pyobj[0]) == dict \
            and 'counts' in pyobj[0] and 'size' in pyobj[0]:
        objs = frUncompressedRLE(pyobj, h, w)
    elif type(pyobj) == list and len(pyobj) == 4:
        objs = frBbox([pyobj], h, w)[0]
    elif type(pyobj) == list and len(pyobj) > 4:
        objs = frPoly([pyobj], h, w)[0]
    elif type(pyobj) == dict and 'counts' in pyobj and 'size' in pyobj:
        objs = frUncompressedRLE([pyobj], h, w)[0]
    else:
        raise Exception('input type is not supported.')
    return objs
