"""A Hugging Face Hub cache built in a test, read offline: `OfflineHub` (the `offline_hub`
fixture of tests/conftest.py) lays out `models--ORG--NAME/` and `datasets--ORG--NAME/` folders
as `huggingface_hub` writes them (`refs/<revision>` holding a commit hash,
`snapshots/<hash>/<files>`), so that `from_pretrained(..., revision=...)` and
`hf_hub_download` find them under `HF_HUB_OFFLINE=1` with no network."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class OfflineHub:
    """The Hub cache at `cache`, where the environment points `HF_HUB_CACHE`."""

    cache: Path

    def add(
        self,
        repo: str,
        source: Path,
        *,
        revision: str = "main",
        folder: str = "",
        kind: str = "model",
    ) -> str:
        """Put a file or the files of directory `source` at `folder` of `repo`'s snapshot of
        `revision` (a branch or tag: `refs/<revision>` names the snapshot's commit); returns
        the commit hash, one per repository and revision."""
        root = self.cache / f"{kind}s--{repo.replace('/', '--')}"
        commit = hashlib.sha1(f"{repo}@{revision}".encode()).hexdigest()
        target = root / "snapshots" / commit / folder
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        ref = root / "refs" / revision
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit)
        return commit
