"""slime adapter: reward hooks loaded by slime's ``pkg.mod.func`` path convention.

.. code-block:: bash

    # per sample (or a fanned-out list)
    --custom-rm-path collimate_rl.slime.reward_func
    # per group, with --group-rm
    --custom-rm-path collimate_rl.slime.group_reward_func --group-rm

Put the ground truth in the sample's label (``--label-key``) or in its
metadata (``ground_truth`` or ``reward_spec.ground_truth``). slime itself is
never imported.

>>> import importlib
>>> module, _, name = "collimate_rl.slime.reward_func".rpartition(".")
>>> getattr(importlib.import_module(module), name) is reward_func
True
"""

from collimate_rl.slime._reward import config_from_args, group_reward_func, reward_func

__all__ = ["config_from_args", "group_reward_func", "reward_func"]
