"""distillscope: a laboratory for controlled strong-to-weak distillation of language models."""

__version__ = "0.1.0"
