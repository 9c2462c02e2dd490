"""The testbed in a VM: a Debian 12 image built with debootstrap, booted in QEMU, checked inside.

`mrc-vm build` builds (once, cached) the image, `mrc-vm test` (`make vm-test`) boots it and runs the
demo and the Linux target's integration tests inside, `mrc-vm box` packs it as a Vagrant box for
libvirt. Nothing here imports the testbed: the VM runs the project, the host only drives it.
"""
