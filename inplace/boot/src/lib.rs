//! systemd-boot boot counting over two slots: entry file names, ordering, selection, counting and blessing.
