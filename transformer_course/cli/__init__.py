"""The course's command-line programs, kept apart from the library they drive.

    python -m transformer_course.translate train          # or: transformer-course-translate train
    python -m transformer_course.translate "咖哥 不 喜欢 他们"
    python -m transformer_course.demo                     # or: transformer-course-demo
    python -m transformer_course.distributed              # or: transformer-course-distributed

Each module here holds a `main(argv) -> exit code` and its argparse parser; it imports the library, and the
library never imports it. Every problem it meets, a bad option or a missing file, is reported as one line
on stderr with a non-zero exit code, never as a traceback (`_common`).
"""
