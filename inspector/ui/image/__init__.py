"""The image pane: the picture and the model input (canvas), the filmstrip of listed images,
dropped, opened or pasted (filmstrip, sources), and boxes and masks drawn over a picture
(task_overlay).
"""
