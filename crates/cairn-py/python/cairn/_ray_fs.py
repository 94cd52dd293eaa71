"""The cairn filesystem under the pyarrow filesystems Ray hands over."""

from __future__ import annotations

from typing import Any, Optional

import pyarrow.fs as pafs

from ._ray_compat import unwrapped
from .fsspec import CairnFileSystem


def cairn_of(filesystem: Any) -> Optional[CairnFileSystem]:
    """The cairn filesystem under a pyarrow filesystem, if there is one:
    ``build_checkpoint_filesystem``'s wrapper (also inside Ray's retrying
    wrapper), or pyarrow's local disk.

    >>> import pyarrow.fs
    >>> cairn_of(pyarrow.fs.LocalFileSystem()).protocol
    ('file',)
    """
    filesystem = unwrapped(filesystem)
    if isinstance(filesystem, pafs.PyFileSystem):
        handler = filesystem.handler
        inner = getattr(handler, "fs", None)
        if isinstance(handler, pafs.FSSpecHandler) and isinstance(inner, CairnFileSystem):
            return inner
    if isinstance(filesystem, pafs.LocalFileSystem):
        return CairnFileSystem("file", checkpoint=True)
    return None
