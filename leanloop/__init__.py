"""leanloop: the shared package. It imports no stage; stages meet only through it and manifests."""

__version__ = "0.1.0"
