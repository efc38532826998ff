"""Installs scripts/requirements.lock into the Python environment running it
(python_env.sh runs it in the shared environment of the lock).

Each pinned package that is missing, or there at another version, is
installed on its own, without its dependencies (the lock names them all) and
without pip's cache: the disk never holds more than one downloaded wheel
beside what is installed (all of them at once, about 3 GiB, is what a single
`pip install -r` holds before it unpacks the first), and an interrupted run
goes on where it stopped.

`--check` installs nothing: it stops with a message when a pin of
scripts/requirements.txt or bench/requirements.txt is not the lock's.
"""
import importlib.metadata
import pathlib
import subprocess
import sys


def pins(lock):
    for number, line in enumerate(lock.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep or not name.strip() or not version.strip():
            sys.exit(f"{lock}:{number}: '{line}' is not a pin (name==version)")
        yield name.strip(), version.strip()


def installed_version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_lock(lock):
    locked = {normalized(name): version for name, version in pins(lock)}
    for source in (lock.with_name("requirements.txt"), lock.parent.parent / "bench" / "requirements.txt"):
        for name, version in pins(source):
            if locked.get(normalized(name)) != version:
                sys.exit(f"{source}: {name}=={version}, but {lock} has "
                         f"{name}=={locked.get(normalized(name), '(nothing)')}: run scripts/lock_requirements.sh")


def normalized(name):
    return name.lower().replace("_", "-").replace(".", "-")


def main():
    lock = pathlib.Path(__file__).with_name("requirements.lock")
    check_lock(lock)
    if sys.argv[1:] == ["--check"]:
        return
    if sys.prefix == sys.base_prefix:
        sys.exit(f"install_requirements.py installs into a virtual environment (python_env.sh makes it), "
                 f"and {sys.executable} is not one")
    wanted = [(name, version) for name, version in pins(lock) if installed_version(name) != version]
    for count, (name, version) in enumerate(wanted, 1):
        print(f"setup: installing {name}=={version} ({count} of {len(wanted)})", flush=True)
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                              "--no-deps", "--no-cache-dir", f"{name}=={version}"])
        if pip.returncode != 0:
            sys.exit(f"setup: pip could not install {name}=={version} from {lock.name} (pip's message is above)")


if __name__ == "__main__":
    main()
