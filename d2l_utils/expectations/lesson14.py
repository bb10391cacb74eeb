"""Lesson 14's GPU-only cells: none yet.

The lesson shows tensor, sequence and pipeline parallelism on CPU ranks (``gloo``), and every
number it gives about a GPU (one block's all-reduces over NVLink or a network link, the
calculator's plans) is printed by a core cell from the course's models and the datasheet table
(``d2l_utils/gpu_models.py``). Its GPU-only cells (a tensor-parallel block over NVLink, the
pipeline bubble on GPUs) and their expectations are drafted in ``drafts/lesson14/`` and register
here once they are in the lesson.
"""
