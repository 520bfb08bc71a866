"""The device under the loop: backends (npu | cuda | cpu), the UB model and the chip/config files."""
