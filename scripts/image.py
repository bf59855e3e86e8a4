#!/usr/bin/env python3
"""Builds an OCI image archive without Docker or a registry: the daemon's image, from the static
binaries of one or more architectures, or any image from a root filesystem directory.

    scripts/image.py daemon --binary amd64=target/x86_64-unknown-linux-gnu/release/slurmops \\
        [--binary arm64=PATH] --tag ghcr.io/slurmops/slurmops:VERSION --output slurmops.oci.tar
    scripts/image.py rootfs DIR --entrypoint /pause [--user 65535:65535] --tag REF [--tag REF...] \\
        [--image REF=/ENTRYPOINT...] --output FILE

The daemon's image holds the binary (/usr/local/bin/slurmops), the CA certificates of this machine
(/etc/ssl/certs/ca-certificates.crt, also named by SSL_CERT_FILE), and /etc/passwd and /etc/group
naming the non-root user 65532 (`nonroot`) it runs as; nothing else: no shell, no package manager.
It runs `slurmops run` unless given other arguments, as the Dockerfile's image does.

The archive is an OCI image layout (oci-layout, index.json, blobs/sha256/...) packed as a tar:
`ctr images import FILE` loads it (tests/bed/node.sh import), `skopeo copy --all oci-archive:FILE
docker://REF` publishes it (.github/workflows/release.yml). With several --binary, index.json names
one image index whose manifests are the platforms. Reproducible: every file's time is 0 and its
owner numeric, so the same binaries give the same digests.

`rootfs` packs a directory as it is (modes, numeric owners, symbolic and hard links; devices,
sockets and FIFOs are left out: a runtime makes /dev) into one layer. With several --tag, the one
archive names the same image by each reference (tests/bed/images.sh: every Slurm daemon's name);
each --image adds an image of the same layer that another entrypoint runs (the login image).
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import struct
import stat
import sys
import tarfile

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
NONROOT = 65532
CA_BUNDLES = ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"]
DAEMON_BINARY = "/usr/local/bin/slurmops"
ELF_MACHINE = {"amd64": 62, "arm64": 183}


def fail(msg):
    print(f"image.py: {msg}", file=sys.stderr)
    sys.exit(1)


class Layer:
    """A deterministic tar of the files an image holds."""

    def __init__(self, level=9):
        self.buf = io.BytesIO()
        self.tar = tarfile.open(fileobj=self.buf, mode="w", format=tarfile.PAX_FORMAT)
        self.dirs = set()
        self.level = level

    def _info(self, path, kind, mode, uid=0, gid=0):
        info = tarfile.TarInfo(path.lstrip("/"))
        info.type, info.mode, info.uid, info.gid, info.mtime = kind, mode, uid, gid, 0
        info.uname = info.gname = ""
        return info

    def dir(self, path, mode=0o755, uid=0, gid=0):
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            p = "/".join(parts[:i])
            if p in self.dirs:
                continue
            self.dirs.add(p)
            last = i == len(parts)
            self.tar.addfile(self._info(p, tarfile.DIRTYPE, mode if last else 0o755, uid if last else 0, gid if last else 0))

    def file(self, path, data, mode=0o644):
        self.dir(os.path.dirname(path))
        info = self._info(path, tarfile.REGTYPE, mode)
        info.size = len(data)
        self.tar.addfile(info, io.BytesIO(data))

    def tree(self, root):
        """Every directory, file and link under ROOT with its mode and numeric owner, in name order."""
        seen = {}
        for base, dirs, files in os.walk(root):
            dirs.sort()
            rel = os.path.relpath(base, root)
            if rel != ".":
                st = os.lstat(base)
                self.dir(rel, st.st_mode & 0o7777, st.st_uid, st.st_gid)
            # os.walk lists links to directories among the directories.
            for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(base, d))]):
                full = os.path.join(base, name)
                path = os.path.normpath(os.path.join(rel, name))
                st = os.lstat(full)
                if stat.S_ISLNK(st.st_mode):
                    info = self._info(path, tarfile.SYMTYPE, 0o777, st.st_uid, st.st_gid)
                    info.linkname = os.readlink(full)
                    self.tar.addfile(info)
                elif not stat.S_ISREG(st.st_mode):
                    continue
                elif st.st_nlink > 1 and (st.st_dev, st.st_ino) in seen:
                    info = self._info(path, tarfile.LNKTYPE, st.st_mode & 0o7777, st.st_uid, st.st_gid)
                    info.linkname = seen[(st.st_dev, st.st_ino)]
                    self.tar.addfile(info)
                else:
                    seen[(st.st_dev, st.st_ino)] = path
                    info = self._info(path, tarfile.REGTYPE, st.st_mode & 0o7777, st.st_uid, st.st_gid)
                    info.size = st.st_size
                    with open(full, "rb") as f:
                        self.tar.addfile(info, f)

    def finish(self):
        """The layer's tar and its gzip, made once (several images may share the layer)."""
        if not hasattr(self, "done"):
            self.tar.close()
            raw = self.buf.getvalue()
            out = io.BytesIO()
            with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=self.level) as gz:
                gz.write(raw)
            self.done = (raw, out.getvalue())
        return self.done


class Layout:
    """The blobs of an OCI image layout, kept in memory until written."""

    def __init__(self):
        self.blobs = {}

    def add(self, data, media):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        self.blobs[digest] = data
        return {"mediaType": media, "digest": digest, "size": len(data)}

    def add_json(self, obj, media):
        return self.add(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode(), media)

    def image(self, layer, arch, entrypoint, cmd, user, env, ports):
        raw, gz = layer.finish()
        config = {
            "architecture": arch,
            "os": "linux",
            "created": "1970-01-01T00:00:00Z",
            "config": {"User": user, "Entrypoint": entrypoint, "Cmd": cmd, "Env": env,
                       "WorkingDir": "/", "ExposedPorts": {p: {} for p in ports}},
            "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]},
            "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "scripts/image.py"}],
        }
        manifest = {
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": self.add_json(config, MEDIA_CONFIG),
            "layers": [self.add(gz, MEDIA_LAYER)],
        }
        desc = self.add_json(manifest, MEDIA_MANIFEST)
        desc["platform"] = {"architecture": arch, "os": "linux"}
        return desc, len(gz)

    def write(self, images, output):
        """IMAGES: (manifests, tags) for each image of the archive; returns the first's digest."""
        named, first = [], None
        for manifests, tags in images:
            if len(manifests) == 1:
                top = dict(manifests[0])
            else:
                top = self.add_json({"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": manifests}, MEDIA_INDEX)
            first = first or top["digest"]
            named += [dict(top, annotations={"io.containerd.image.name": t, "org.opencontainers.image.ref.name": t})
                      for t in tags]
        index = {"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": named}
        tmp = output + ".tmp"
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as t:
            def put(name, data):
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(data), 0, 0o644
                t.addfile(info, io.BytesIO(data))
            put("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
            put("index.json", json.dumps(index, sort_keys=True).encode())
            for digest in sorted(self.blobs):
                put("blobs/sha256/" + digest.split(":", 1)[1], self.blobs[digest])
        os.replace(tmp, output)
        return first


def dynamic(binary, path):
    """Whether the ELF file BINARY asks for a program interpreter (PT_INTERP): a C library."""
    if binary[:4] != b"\x7fELF" or binary[4] != 2:
        fail(f"{path} is not a 64-bit ELF program")
    endian = "<" if binary[5] == 1 else ">"
    phoff, = struct.unpack_from(endian + "Q", binary, 0x20)
    phentsize, phnum = struct.unpack_from(endian + "HH", binary, 0x36)
    return any(struct.unpack_from(endian + "I", binary, phoff + i * phentsize)[0] == 3 for i in range(phnum))


def daemon(args, layout):
    try:
        ca = next(open(p, "rb").read() for p in CA_BUNDLES if os.path.exists(p))
    except StopIteration:
        fail(f"no CA certificates on this machine ({', '.join(CA_BUNDLES)}): install ca-certificates")
    manifests = []
    for spec in args.binary:
        arch, _, path = spec.partition("=")
        if not path or arch not in ("amd64", "arm64"):
            fail(f"--binary {spec}: write ARCH=PATH with ARCH amd64 or arm64")
        try:
            binary = open(path, "rb").read()
        except OSError as e:
            fail(f"--binary {spec}: {e.strerror}")
        # A dynamically linked binary finds no C library in this image: refuse it here, not at
        # the pod's start.
        machine = struct.unpack_from("<H", binary, 0x12)[0] if binary[:4] == b"\x7fELF" else None
        if machine != ELF_MACHINE[arch]:
            fail(f"--binary {spec}: {path} is not a program for {arch} (ELF machine {machine}, want {ELF_MACHINE[arch]})")
        if dynamic(binary, path):
            fail(f"{path} is dynamically linked; the image holds no C library: build it static "
                 "(RUSTFLAGS='-C target-feature=+crt-static' OPENSSL_STATIC=1 cargo build --release --target ...)")
        layer = Layer()
        layer.file(DAEMON_BINARY, binary, 0o755)
        layer.file("/etc/ssl/certs/ca-certificates.crt", ca)
        layer.file("/etc/passwd", f"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{NONROOT}:{NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n".encode())
        layer.file("/etc/group", f"root:x:0:\nnonroot:x:{NONROOT}:\n".encode())
        layer.dir("/home/nonroot", 0o700, NONROOT, NONROOT)
        layer.dir("/tmp", 0o1777)
        desc, size = layout.image(
            layer, arch, [DAEMON_BINARY], ["run"], f"{NONROOT}:{NONROOT}",
            ["PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"],
            ["8080/tcp"])
        print(f"{args.tag[0]} linux/{arch}: {desc['digest']}, layer {size / 1048576:.1f} MiB compressed", file=sys.stderr)
        manifests.append(desc)
    return manifests


def rootfs(args, layout):
    if not os.path.isdir(args.dir):
        fail(f"{args.dir}: not a directory")
    # Level 6: a root filesystem of some hundred MiB packs in seconds, not a minute.
    layer = Layer(level=6)
    layer.tree(args.dir)
    env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    desc, size = layout.image(layer, args.arch, [args.entrypoint], args.cmd, args.user, env, [])
    print(f"{' '.join(args.tag)} linux/{args.arch}: {desc['digest']}, layer {size / 1048576:.1f} MiB compressed", file=sys.stderr)
    images = [([desc], args.tag)]
    # Another image of the same layer, with its own entrypoint (no command: the entrypoint's own).
    for spec in args.image:
        ref, _, entrypoint = spec.partition("=")
        if not ref or not entrypoint.startswith("/"):
            fail(f"--image {spec}: write REF=/ENTRYPOINT")
        other, _ = layout.image(layer, args.arch, [entrypoint], [], args.user, env, [])
        print(f"{ref} linux/{args.arch}: {other['digest']} (the same layer, entrypoint {entrypoint})", file=sys.stderr)
        images.append(([other], [ref]))
    return images


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="kind", required=True)
    d = sub.add_parser("daemon", help="the slurmops daemon's image")
    d.add_argument("--binary", action="append", required=True, help="ARCH=PATH of a static slurmops (repeat per architecture)")
    r = sub.add_parser("rootfs", help="an image of a root filesystem directory")
    r.add_argument("dir")
    r.add_argument("--entrypoint", required=True)
    r.add_argument("--cmd", action="append", default=[])
    r.add_argument("--user", default="0:0")
    r.add_argument("--arch", default="amd64")
    r.add_argument("--image", action="append", default=[],
                   help="REF=/ENTRYPOINT: one more image in the archive, of the same layer, run by ENTRYPOINT")
    for s in (d, r):
        s.add_argument("--tag", action="append", required=True,
                       help="the image's reference, e.g. ghcr.io/slurmops/slurmops:0.1.0 (repeat for more names)")
        s.add_argument("--output", required=True, help="the OCI archive to write")
    args = p.parse_args()
    layout = Layout()
    images = [(daemon(args, layout), args.tag)] if args.kind == "daemon" else rootfs(args, layout)
    digest = layout.write(images, args.output)
    tags = [t for _, ts in images for t in ts]
    print(f"wrote {args.output}: {' '.join(tags)} ({digest}, {os.path.getsize(args.output) / 1048576:.1f} MiB)", file=sys.stderr)


if __name__ == "__main__":
    main()
