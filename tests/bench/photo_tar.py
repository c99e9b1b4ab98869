"""photo_tar.py IN.tar OUT.tar PHOTO...
photo_tar.py --annotation SA_ID.json OUT.tar PHOTO
photo_tar.py --repeat N SA_ID.json OUT.tar PHOTO...

Replaces every sa_<id>.jpg of a sa1b-synth tar (its annotations kept) with
a crop of a real photograph at the same size, so that benchmarks measure
image bytes of real pictures: photo (id mod n), a crop of the photo's
largest region of the member's aspect ratio, scaled by 70..100% and placed
at random (seeded by the id), mirrored for odd ids, resized with Lanczos
and saved as JPEG quality 90 (SA-1B's images are JPEGs of about that).
With --annotation: a tar of that one (real) annotation file and the
photograph resized to its image size.  With --repeat: N samples sa_1 ..
sa_N, each the (real) annotation's masks under its own image id and file
name (single-line JSON, as SA-1B's files are) and a crop as above at the
annotation's image size, so that benchmarks see real masks too.  Needs
Pillow (Debian python3-pil)."""
import io
import json
import random
import sys
import tarfile

from PIL import Image


def add(tout, name, data, mtime=0):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = mtime
    tout.addfile(info, io.BytesIO(data))


def one_annotation(json_path, dst, photo):
    text = open(json_path, "rb").read()
    image = json.loads(text)["image"]
    pic = Image.open(photo).convert("RGB").resize((image["width"], image["height"]), Image.LANCZOS)
    buf = io.BytesIO()
    pic.save(buf, "JPEG", quality=90)
    name = image["file_name"]
    with tarfile.open(dst, "w", format=tarfile.USTAR_FORMAT) as tout:
        add(tout, name, buf.getvalue())
        add(tout, name[:-4] + ".json", text)


def crop_jpeg(pics, img_id, w, h):
    """The JPEG bytes of sample img_id: a w x h crop of photo img_id mod n."""
    rng = random.Random(img_id)
    pic = pics[img_id % len(pics)]
    pw, ph = pic.size
    cw = min(pw, ph * w // h)
    ch = cw * h // w
    f = rng.uniform(0.7, 1.0)
    cw, ch = int(cw * f), int(ch * f)
    x, y = rng.randint(0, pw - cw), rng.randint(0, ph - ch)
    out = pic.crop((x, y, x + cw, y + ch)).resize((w, h), Image.LANCZOS)
    if img_id % 2:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    buf = io.BytesIO()
    out.save(buf, "JPEG", quality=90)
    return buf.getvalue()


def repeat_annotation(n, json_path, dst, photos):
    d = json.loads(open(json_path, "rb").read())
    w, h = d["image"]["width"], d["image"]["height"]
    pics = [Image.open(p).convert("RGB") for p in photos]
    with tarfile.open(dst, "w", format=tarfile.USTAR_FORMAT) as tout:
        for k in range(1, n + 1):
            d["image"]["image_id"] = k
            d["image"]["file_name"] = "sa_%d.jpg" % k
            add(tout, "sa_%d.jpg" % k, crop_jpeg(pics, k, w, h))
            add(tout, "sa_%d.json" % k, json.dumps(d, separators=(",", ":")).encode())


def main():
    if sys.argv[1] == "--annotation":
        one_annotation(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    if sys.argv[1] == "--repeat":
        repeat_annotation(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:])
        return
    src, dst, photos = sys.argv[1], sys.argv[2], sys.argv[3:]
    pics = [Image.open(p).convert("RGB") for p in photos]
    with tarfile.open(src) as tin, tarfile.open(dst, "w", format=tarfile.USTAR_FORMAT) as tout:
        for m in tin.getmembers():
            data = tin.extractfile(m).read()
            if m.name.endswith(".jpg"):
                img_id = int(m.name.rsplit("_", 1)[1].split(".")[0])
                w, h = Image.open(io.BytesIO(data)).size
                data = crop_jpeg(pics, img_id, w, h)
            add(tout, m.name, data, m.mtime)


if __name__ == "__main__":
    main()
