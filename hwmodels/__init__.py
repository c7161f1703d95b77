"""Intra-host interconnect and SmartNIC/FPGA datapath models (numba).

Not built yet: the hardware-models issue fills this package (DGX-1/PCIe/
A100/H100 presets, transfer model, DGCL SPST, LEO datapaths). Pure code: no
root, no Mininet.
"""
