"""The built-in testbed: tiny Llama teacher and student shipped inside the package.

``testbed:teacher`` / ``testbed:student`` in a config resolve to these directories
(:func:`distillscope.models.resolve_model_path`); their build record is :func:`testbed_info`.
Building them (:mod:`.build`, :mod:`.recipe`) imports torch: those are imported from their module.
"""

from distillscope.models.locate import TESTBED_ROLES as ROLES
from distillscope.models.locate import TESTBED_WEIGHTS_DIR as WEIGHTS_DIR
from distillscope.models.locate import testbed_info, testbed_path

__all__ = ["ROLES", "WEIGHTS_DIR", "testbed_info", "testbed_path"]
