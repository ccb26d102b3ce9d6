"""The hash of every released battery version (``sandbox.scoring.battery.definition_hash``).

Changing a battery's definition changes its hash: bump its ``version`` and add the new hash here
(keep the old ones: a version number never names two definitions).
"""

VERSIONS = {
    "paper": {1: "579b2148553220f65394ef96d63054e8e97950c6687c3411e65a9215bf5e4c73",
              2: "dca13fdf0e487c0154b68d1815881ad685272cc6fc5a9f43bc034744c98b8d01",  # + inference-engine cells
              3: "b8a8240ae0d7a3387504ddc2160489c015c4d7a32fd00c5b3b6224eab72b0de1"},  # the LM's staleness as RunConfig.staleness
    "quick": {1: "01705005bd8d8b18ca1b6c75ac4e81b544ce202c3af8f5fac2c5e66f91eeedb8",
              2: "78ba56b1e77f16505cc3f41baab9aec5af45946853bb5cfda00d0e45c0bcae90"},  # + inference-engine cells
    # sandbox check's deployment battery: the hash of its canonical deployment on quick
    # (sandbox.check.deployment.CANONICAL, every cell), one per template version
    "deployment": {1: "615dc6a314465bead6ec3f690075acc68c971fe0964971464d60526f7f606ef5",
                   2: "3db6f5e25c5624b25c4b7d3473434bdffc6c550d1a4896cd8bd0220f3fdf7a51"},  # + an MNIST control (each cell against its own environment's control)
    "standard": {1: "7bcc34a30d3270d6baee306a4ac9c4d6d5562e14bb22405b26c1137d9cd3f517",
                 2: "b769fe7d521a6b44ae42d693ee29fd7024e547dc683ded56c108475c8765d40e",  # + inference-engine cells
                 3: "9f43fad224f4b8e8c89f9e8e1abc34ce4ef994ac2d1db78a24d9edbb9ba08217"},  # the LM's staleness as RunConfig.staleness (same runs)
}
